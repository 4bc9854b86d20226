"""``dsh exec``: one command run as the model's bash tool would, as one turn of a session."""

import math
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from dsh.agent import Agent, ScriptedModel, ToolCall, TranscriptNotSaved, unsaved_message
from dsh.bash import (
    SHELL_EXECUTOR,
    ExecResult,
    Executor,
    driven_blocking,
    interrupted_result,
    interruption,
    world_of,
)
from dsh.bash_env import outer_claim
from dsh.cli_fast._status import BLOCKED_EXIT
from dsh.harness import notice_line
from dsh.loader import Runtime
from dsh.paths import INTERRUPTS
from dsh.session import SESSIONS, TOOLS, PersistenceError, Session, ToolResult
from dsh.session.persistence import acquire_waits

from ._errors import UsageError


class ExecOutcome(NamedTuple):
    """What ``dsh exec --json`` prints (a contract); a ``NamedTuple``, cheaper to define than a dataclass."""

    session_id: str
    location: dict[str, str] | None
    exit_code: int | None
    """The command's status: its own, 128+N for signal N, 124 when the timeout killed it; None when
    dsh failed before it ran (``error`` says why; ``dsh exec`` exits 125)."""
    stdout: str
    stderr: str
    timed_out: bool = False
    timeout: float | None = None
    """Seconds the command was allowed (None when the tool did not say)."""
    error: str | None = None
    """Why dsh failed: before the command ran (``exit_code`` None) or, after it ran, why its
    transcript could not be saved (``dsh exec`` exits 125 either way)."""
    interrupted: str | None = None
    """The signal that interrupted the command (its group killed; ``exit_code`` is then 128+N)."""
    status_known: bool = True
    """False when the command ran but its status could not be learned (another ``waitpid()`` took it,
    the connection to its SSH host was lost): ``exit_code`` is then 255, ``stderr`` ends with the line
    saying why, and ``dsh exec`` exits 255."""
    notices: tuple[str, ...] = ()
    """Lines for dsh's own stderr (hooks' ``systemMessage``, hook failures); not in ``--json``."""

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` document."""
        document = self._asdict()
        del document["notices"]
        return document


def _exact(seconds: float) -> str:
    """``seconds`` as given (``600.0000001``, not ``:g``'s ``600``), without a trailing ``.0``."""
    return repr(seconds).removesuffix(".0")


def _timeout(runtime: Runtime, requested: float | None) -> float | None:
    """The timeout the command gets: ``requested`` checked against the bash tool's limit, else its default."""
    tools = runtime.ctx.get(TOOLS)
    config = getattr(tools.get("bash") if tools is not None else None, "config", None)
    maximum = getattr(config, "max_timeout", None)
    if requested is None:
        default = getattr(config, "default_timeout", None)
        return float(default) if isinstance(default, int | float) else None
    if not (math.isfinite(requested) and requested > 0):
        raise UsageError(
            f"--timeout must be a positive number of seconds, not {requested!r}", option="--timeout", value=requested
        )
    if isinstance(maximum, int | float) and requested > maximum:
        raise UsageError(
            f"--timeout {_exact(requested)} is over the bash tool's limit of {_exact(maximum)} s "
            "(max_timeout of tool-bash in the deployment)",
            option="--timeout",
            value=requested,
        )
    return requested


async def exec_command(
    runtime: Runtime,
    command: str,
    *,
    session_id: str | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
    ambient: Mapping[str, str] | None = None,
) -> ExecOutcome:
    """Run ``command`` through the bash tool in a new session (or ``session_id``'s), as one turn.

    ``ambient``: the environment the command starts from when not this process's (a served
    client's), carried by the call's ``ToolExecution``.

    Everything that can fail before the command runs is checked first: the command, ``cwd``,
    the timeout, the backend, the session, and its write lock (held until the turn's flush).
    When the command ran but its transcript could not be saved, the outcome carries ``error``.
    """
    if not command.strip():
        raise UsageError("dsh exec needs a command after --", option="--", value=command)
    # On a remote host the working directory is a path there: the executor checks it (nothing runs
    # when it is missing); a local or sandboxed command's must exist here.
    executor: Executor | None = runtime.ctx.get(SHELL_EXECUTOR)
    remote = world_of(executor).kind == "remote"
    if cwd is not None and not remote and not os.path.isdir(cwd):
        raise UsageError(f"--cwd {cwd} is not a directory", option="--cwd", value=cwd)
    allowed = _timeout(runtime, timeout)
    store = runtime.ctx.require(SESSIONS)

    def open_session() -> Session:
        if session_id is not None:
            return store.resume(session_id, lock=True, history=False)  # a turn needs no history
        # A dsh started in another dsh's shell records that shell's call as its parent (claimed).
        return store.create(cwd, lock=True, **outer_claim(os.environ if ambient is None else ambient))

    if driven_blocking() or (session_id is None and not acquire_waits(store.persistence())):
        # A cold `dsh exec` (driven without an event loop: nothing else to hold up), or a new session of
        # a backend whose lock never waits (JSONL: a new session reads nothing): opened here, without a
        # thread's round trip. A resume reads the stored session, whose size is the user's: never here.
        session = open_session()
    else:
        import asyncio

        # Off the event loop: taking the lock may wait (a pool with every connection held by running
        # turns, a busy SQLite database), a resume reads a transcript of any size, and `dsh serve` runs
        # every client's command on this one loop.
        session = await asyncio.to_thread(open_session)
    notices: list[str] = []
    error: str | None = None
    # The lock, taken above before anything ran, is kept for the turn and SessionEnd's record after it.
    with session.holding():
        if session_id is not None and not remote and not os.path.isdir(session.header.cwd):
            # Checked before SessionStart and the turn: a command that cannot run leaves no record.
            raise UsageError(
                f"session {session.id}: its working directory {session.header.cwd} does not exist; "
                "recreate it to resume the session (nothing was run or recorded)",
                option="--session",
                value=session_id,
            )
        agent = Agent(
            runtime.ctx, session, ScriptedModel([]), notify=lambda n: notices.append(notice_line(n)), ambient=ambient
        )
        stopped = await agent.start("resume" if session_id is not None else "startup")
        if stopped is not None:
            # A SessionStart hook said "continue": false: the command does not run.
            await agent.end()
            why = f"stopped by a SessionStart hook: {stopped}\n"
            return ExecOutcome(
                session.id, location_json(session), BLOCKED_EXIT, "", why, timeout=allowed, notices=tuple(notices)
            )
        arguments: dict[str, Any] = {"command": command}
        if timeout is not None:  # the tool applies its own default; hooks see only what was asked
            arguments["timeout"] = allowed
        try:
            result = await agent.run_tool_turn(ToolCall(name="bash", arguments=arguments))
        except TranscriptNotSaved as exc:
            if not isinstance(exc.result, ToolResult):
                raise
            result, error = exc.result, str(exc)
        except BaseException as exc:
            # A signal killed the command's group, and its turn is recorded as interrupted: what the
            # command printed until then is shown (and `--json` printed) as for a timeout.
            printed, reason = interrupted_result(exc), interruption(exc)
            if printed is None or reason not in INTERRUPTS:
                raise
            return ExecOutcome(
                session.id,
                location_json(session),
                printed.exit_code,
                printed.stdout,
                printed.stderr,
                timeout=allowed,
                interrupted=reason,
                notices=tuple(notices),
            )
        try:
            await agent.end()
        except (PersistenceError, OSError) as exc:  # SessionEnd's record: the command has run
            error = error or unsaved_message(session.id, exc)
    ran = result.value
    warnings = result.data.get("warnings") if isinstance(result.data, Mapping) else None
    notices.extend(f"dsh: warning: {w}" for w in warnings or ())  # optional contributors that failed
    code: int | None
    known = True
    if isinstance(ran, ExecResult):
        code, stdout, stderr, timed_out = ran.exit_code, ran.stdout, ran.stderr, ran.timed_out
        known = ran.status_known
    elif result.blocked:  # a hook blocked it: its reason is the command's stderr, status 126
        code, stdout, stderr, timed_out = BLOCKED_EXIT, "", result.output + "\n", False
    else:
        # dsh (a contributor, the tool) failed before the command ran: nothing ran, so no status.
        code, stdout, stderr, timed_out = None, "", "", False
        error = result.output
    return ExecOutcome(
        session.id,
        location_json(session),
        code,
        stdout,
        stderr,
        timed_out=timed_out,
        timeout=allowed,
        error=error,
        status_known=known,
        notices=tuple(notices),
    )


def location_json(session: Session) -> dict[str, str] | None:
    """A session's location as ``--json`` outputs print it."""
    location = session.locate()
    return None if location is None else {"kind": location.kind, "path": location.path}
