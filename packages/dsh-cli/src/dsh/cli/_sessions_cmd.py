"""``dsh sessions fork`` and ``dsh sessions verify``."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from dsh.bash_env import SESSION_ID_KEY, SESSION_JSONL_KEY, TOOL_CALL_ID_KEY, TURN_ID_KEY
from dsh.paths import trust_fault
from dsh.session import (
    SESSIONS,
    PersistenceError,
    Session,
    SessionEvent,
    SessionLockedError,
    SessionNotFoundError,
    validate_session_id,
)
from dsh.session.persistence import BEGAN_EVENT, FilePersistence, SessionPersistence, unsettled

from ._errors import UsageError
from ._exec import location_json
from ._open import open_runtime
from ._output import print_json, say

FORK_EVENT = "session/fork"


def turn_boundary(session: Session, turns: int) -> int:
    """How many events precede turn ``turns + 1``: the prefix holding the first ``turns`` turns."""
    total = session.turns
    if not 0 <= turns <= total:
        raise UsageError(
            f"session {session.id} has {total} turn(s); --at takes 0 to {total}", option="--at", value=turns
        )
    seen = 0
    for index, event in enumerate(session.history):
        if event.type == "turn/start":
            if seen == turns:
                return index
            seen += 1
    return len(session.history)


def fork(args: argparse.Namespace) -> int:
    """``dsh sessions fork ID [--at TURN]``: a new, stored session seeded with a prefix of ``ID``."""
    with open_runtime(args.deployment) as runtime:
        store = runtime.ctx.require(SESSIONS)
        parent = store.resume(args.id)
        at = parent.turns if args.at is None else args.at
        child = store.fork(parent.id, upto=turn_boundary(parent, at))
        # The marker makes even an empty prefix a stored session that `dsh exec --session` can resume.
        child.record(FORK_EVENT, parent_session=parent.id, at_turn=at, seed_length=child.header.seed_length)
        child.flush()
        header = child.header
        if args.json:
            print_json(
                {
                    "session_id": header.id,
                    "parent_session": header.parent_session,
                    "origin": header.origin,
                    "at_turn": at,
                    "seed_length": header.seed_length,
                    "location": location_json(child),
                }
            )
        else:
            say(header.id)
        return 0


class Verdict:
    """What ``dsh sessions verify`` found (``--json`` prints it), filled in as the checks run."""

    __slots__ = ("call", "notes", "path", "problems", "session_id", "status", "unknown", "unreadable")

    def __init__(self, session_id: str, path: str | None) -> None:
        self.session_id = session_id
        self.path = path
        self.status = "consistent"
        """``consistent``, ``unflushed`` (the first turn is still running) or ``inconsistent``."""
        self.call: dict[str, str] | None = None
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.unreadable = False
        """The transcript exists but was not read (a symlink, not a file, not parseable): no call check."""
        self.unknown: list[dict[str, Any]] = []
        """Commands that began and whose outcome is unknown: a kill before their turn was stored."""

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` document."""
        return {
            "session_id": self.session_id,
            "path": self.path,
            "status": self.status,
            "call": self.call,
            "problems": self.problems,
            "notes": self.notes,
            "unknown_outcomes": self.unknown,
        }


def _is_first_turn(turn_id: str | None, session_id: str) -> bool:
    # Turn ids are "<session id>:turn-<n>" (Agent._open_turn); n counts from 1.
    return turn_id == f"{session_id}:turn-1"


def _check_file(
    path: str, session_id: str, verdict: Verdict, persistence: SessionPersistence
) -> list[SessionEvent] | None:
    """File checks, then the header, read by the deployment's backend; the events, or None when there is no file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        verdict.problems.append(f"{path}: cannot stat: {exc.strerror or exc}")
        verdict.unreadable = True
        return []
    if stat.S_ISLNK(st.st_mode):
        verdict.problems.append(f"{path} is a symbolic link; dsh never writes a transcript through one")
        verdict.unreadable = True
        return []
    if not stat.S_ISREG(st.st_mode):
        verdict.problems.append(f"{path} is not a regular file")
        verdict.unreadable = True
        return []
    # Owner and mode by dsh-paths' one trust rule (trust_fault), in this verb's words.
    fault = trust_fault(st)
    if fault == "owner":
        verdict.problems.append(f"{path} is owned by uid {st.st_uid}, not by you (uid {os.geteuid()}) or root")
    elif fault == "mode":
        verdict.problems.append(
            f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); dsh writes transcripts 0600"
        )
    directory = os.path.dirname(path)
    try:
        folder = trust_fault(os.stat(directory), above=True)
    except OSError:
        folder = None
    if folder == "owner":
        verdict.problems.append(f"{directory} is owned by someone else, who could replace the transcript")
    elif folder == "mode":
        verdict.problems.append(f"{directory} is writable by group or others, who could replace the transcript")
    if not isinstance(persistence, FilePersistence):
        verdict.problems.append(
            f"{path}: the deployment's {type(persistence).__name__} keeps no transcript files, so it cannot read "
            "this one; verify the session with --session ID, or pass the deployment that wrote it (--deployment)"
        )
        verdict.unreadable = True
        return []
    try:
        stored = persistence.load_file(path)
    except (PersistenceError, OSError) as exc:
        verdict.problems.append(str(exc))
        verdict.unreadable = True
        return []
    if stored.header.id != session_id:
        verdict.problems.append(f"{path}: the header's session id is {stored.header.id}, not {session_id}")
    verdict.notes.extend(stored.damage)
    return list(stored.events)


def _check_call(
    events: Sequence[SessionEvent] | None, call_id: str | None, turn_id: str | None, where: str, verdict: Verdict
) -> None:
    if not call_id:
        verdict.problems.append(
            f"--call needs ${TOOL_CALL_ID_KEY}, which a harness-managed shell of session {verdict.session_id} has"
        )
        return
    recorded = events is not None and any(e.type == "tool/call" and e.data.get("call_id") == call_id for e in events)
    if recorded:
        verdict.call = {"id": call_id, "status": "recorded"}
        return
    turn_ended = events is not None and any(e.type == "turn/end" and e.data.get("turn_id") == turn_id for e in events)
    if turn_id and not turn_ended and (events is not None or verdict.status == "unflushed"):
        # The launching turn is still open: its events are buffered until the turn-end flush.
        verdict.call = {"id": call_id, "status": "pending", "turn_id": turn_id}
        return
    verdict.call = {"id": call_id, "status": "missing"}
    reason = f"its turn {turn_id} has ended" if turn_id else f"${TURN_ID_KEY} is not set"
    verdict.problems.append(f"call {call_id} is not recorded in {where}, and {reason}")


def _began(
    verdict: Verdict, events: Sequence[SessionEvent] | None, records: Sequence[SessionEvent], running: bool
) -> None:
    """Report commands whose outcome is unknown: ``records`` are write-ahead records no flush settled
    (a problem, unless their writer is ``running`` still: then only ``--json`` lists them, marked
    running), ``tool/began`` events of ``events`` ones a later flush folded in (a note: the
    transcript says so itself)."""
    folded = [e for e in events or () if e.type == BEGAN_EVENT]
    for event, stored in [*((e, True) for e in folded), *((e, False) for e in records)]:
        data = event.data
        arguments = data.get("arguments")
        command = arguments.get("command", arguments) if isinstance(arguments, dict) else arguments
        verdict.unknown.append({**data, "at": event.at, "folded": stored, "running": running and not stored})
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.at))
        what = f"call {data.get('call_id')} ({data.get('name')}: {command!s}) began at {when}"
        if stored:
            verdict.notes.append(f"{what}; its outcome is unknown (dsh was stopped while it ran)")
        elif not running:  # a running call (the caller's own, often) is no news: --json lists it
            verdict.problems.append(
                f"{what} and its outcome is unknown: dsh was stopped before recording it; the session's "
                f"next turn (dsh exec --session {verdict.session_id} ...) records it so"
            )


def _writer_running(backend: SessionPersistence, session: Session) -> bool:
    """Whether another writer holds the session's lock now (taken and dropped at once when free)."""
    take = getattr(backend, "acquire", None)
    if take is None:
        return False
    try:
        take(session.header)()
    except SessionLockedError:
        return True
    except PersistenceError:
        return False
    return False


def _file_began(
    path: str, session_id: str, verdict: Verdict, persistence: FilePersistence
) -> tuple[Sequence[SessionEvent], bool]:
    """The write-ahead records beside the transcript ``path`` it does not hold, and whether their writer runs."""
    try:
        found = persistence.unsettled_at(path, session_id)
    except (PersistenceError, OSError) as exc:
        verdict.problems.append(f"{path}: its write-ahead records cannot be read: {exc}")
        return (), False
    if found is None:
        return (), False
    return found.events, persistence.lock_held(path)


def run_verify(
    env: Mapping[str, str], *, session: str | None, path: str | None, call: bool, deployment: str | None
) -> Verdict:
    """Check a transcript against a session id (by default the calling shell's ``$DSH_*`` facts)."""
    current = env.get(SESSION_ID_KEY) or None
    session_id = session or current
    if not session_id:
        raise UsageError(
            f"dsh sessions verify needs a session: pass --session ID, or run it in a harness-managed shell "
            f"(${SESSION_ID_KEY} is not set)",
            option="--session",
        )
    validate_session_id(session_id)
    own = session_id == current  # the calling shell's own session: its other $DSH_* facts apply
    path = path or (env.get(SESSION_JSONL_KEY) if own else None) or None
    turn_id = env.get(TURN_ID_KEY) if own else None
    verdict = Verdict(session_id, os.path.abspath(path) if path else None)
    events: list[SessionEvent] | None
    where = path or f"session {session_id}"
    records: Sequence[SessionEvent] = ()
    running = False
    # The transcript is read through the deployment's backend (the persistence seam), never by name.
    with open_runtime(deployment) as runtime:
        store = runtime.ctx.require(SESSIONS)
        backend = store.persistence()
        if verdict.path is not None:
            events = _check_file(verdict.path, session_id, verdict, backend)
            if isinstance(backend, FilePersistence):
                records, running = _file_began(verdict.path, session_id, verdict, backend)
        else:
            try:
                stored = store.resume(session_id, history=False)  # read below only if not a transcript file
            except SessionNotFoundError:
                events = None
            else:
                location = stored.locate()
                if location is not None and isinstance(backend, FilePersistence):
                    verdict.path = where = location.path
                    events = _check_file(location.path, session_id, verdict, backend)
                    records, running = _file_began(location.path, session_id, verdict, backend)
                else:
                    where = f"session {session_id} in the deployment's {type(backend).__name__}"
                    found = unsettled(backend, session_id)
                    records = () if found is None else found.events
                    events = list(stored.history)[: len(stored.history) - len(records)] if stored.stored else None
                    verdict.notes.extend(stored.damage)
                    running = bool(records) and _writer_running(backend, stored)
    _began(verdict, events, records, running)
    if events is None and records:
        if running:  # known only by what began, which still runs: its first turn is open
            verdict.status = "unflushed"
            verdict.notes.append(f"session {session_id} has not been flushed yet: its first turn is still running")
    elif events is None:
        if _is_first_turn(turn_id, session_id):
            verdict.status = "unflushed"
            verdict.notes.append(
                f"session {session_id} has not been flushed yet: its first turn ({turn_id}) is still running"
            )
        else:
            verdict.problems.append(f"{where} does not exist" if path else f"no stored session {session_id}")
    call_id = env.get(TOOL_CALL_ID_KEY) if own else None
    unknown = [u for u in verdict.unknown if u.get("call_id") == call_id and not u["running"]]
    if call and unknown:
        verdict.call = {"id": str(call_id), "status": "unknown"}  # began; the kill took its outcome
    elif call and not verdict.unreadable:
        _check_call(events, call_id, turn_id, where, verdict)
    if verdict.problems:
        verdict.status = "inconsistent"
    return verdict


def verify(args: argparse.Namespace) -> int:
    """``dsh sessions verify``: exit 0 when consistent (or not yet flushed), 1 with one line per problem."""
    verdict = run_verify(os.environ, session=args.session, path=args.path, call=args.call, deployment=args.deployment)
    if args.json:
        print_json(verdict.as_json())
    else:
        for note in verdict.notes:
            say(f"note: {note}")
        # Each problem is a refusal of the transcript: one `dsh:` line on stderr, as every refusal.
        for problem in verdict.problems:
            print(f"dsh: {problem}", file=sys.stderr)
        if not verdict.problems:
            if verdict.path is not None:
                line = f"ok: {verdict.path} belongs to session {verdict.session_id}"
            else:  # a backend without a file (SQLite, PostgreSQL): the stored session was read and checked
                line = f"ok: stored session {verdict.session_id} is consistent"
            if verdict.status == "unflushed":
                line = f"ok: session {verdict.session_id} is not flushed yet"
            if verdict.call is not None:
                line += f"; call {verdict.call['id']} is {verdict.call['status']}"
            say(line)
    return 1 if verdict.problems else 0
