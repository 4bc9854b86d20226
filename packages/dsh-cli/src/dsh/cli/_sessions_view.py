"""``dsh sessions list``, ``locate``, ``show`` and ``migrate``: reading the store."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from dsh.loader import Runtime
from dsh.session import SESSIONS, SessionHeader

from ._exec import location_json
from ._open import open_runtime
from ._output import on_terminal, print_json, say, terminal_safe
from ._show import children_of, render

if TYPE_CHECKING:
    import argparse


def _migrate(runtime: Runtime) -> int:
    """``dsh sessions migrate``: apply the backend's schema migrations, if it has any."""
    backend = runtime.ctx.require(SESSIONS).persistence()
    migrate = getattr(backend, "migrate", None)
    if migrate is None:
        say(f"the {runtime.deployment.persistence.backend} backend keeps no schema: nothing to migrate")
        return 0
    before, after = migrate()
    say(
        f"{getattr(backend, 'where', repr(backend))}: schema version {after}"
        + (f" (was {before})" if before != after else " (up to date)")
    )
    return 0


def sessions_verb(args: argparse.Namespace) -> int:
    """``dsh sessions list``, ``locate``, ``show`` and ``migrate`` (fork and verify: ``_sessions_cmd``)."""
    with open_runtime(choice=args.choice) as runtime:
        if args.action == "migrate":
            return _migrate(runtime)
        store = runtime.ctx.require(SESSIONS)
        if args.action == "list":
            scan = store.scan()
            headers = scan.headers
            # One damaged transcript never hides the others: each is one line on stderr.
            for line in scan.damaged:
                print(_for(sys.stderr, f"dsh: warning: skipped a damaged session: {line}"), file=sys.stderr)
            if args.json:
                print_json({"sessions": [h.to_dict() for h in headers], "damaged": list(scan.damaged)})
            else:
                say(*(_for(sys.stdout, f"{h.id}  {h.created_at}  {h.cwd}{_parent(h.parent_session)}") for h in headers))
            return 0
        session = store.resume(args.id, history=args.action != "locate")
        location = location_json(session)
        if args.action == "locate":
            if args.json:
                print_json({"session_id": session.id, "location": location})
            elif location is None:
                # Stdout stays empty, so `tail -f "$(dsh sessions locate ID)"` never gets a sentence as a path.
                backend = runtime.deployment.persistence.backend
                print(
                    f"dsh: session {session.id} has no transcript file: the {backend} backend keeps it in its "
                    "database (`dsh sessions show` reads it)",
                    file=sys.stderr,
                )
                return 1
            else:
                say(location["path"])
            return 0
        events = [e.to_dict() for e in session.history]
        # Children are found by listing through the persistence seam: every backend can list.
        children = children_of(session.header, store.scan().headers)
        if args.json:
            print_json(
                {
                    "header": session.header.to_dict(),
                    "location": location,
                    "events": events,
                    "damage": list(session.damage),
                    "children": [_child(child, session.id) for child in children],
                }
            )
        else:
            path = location["path"] if location else None
            say(*(_for(sys.stdout, line) for line in render(session.header, path, session.history, children)))
            for line in session.damage:
                print(_for(sys.stderr, f"damage: {line}"), file=sys.stderr)
        return 0


def _for(stream: TextIO | None, line: str) -> str:
    """``line`` as it may be written to ``stream``: a stored transcript's text is data from a command,
    so on a terminal its control characters are shown escaped; a pipe or a file gets the bytes."""
    return terminal_safe(line) if on_terminal(stream) else line


def _child(child: SessionHeader, parent: str) -> dict[str, str | None]:
    """One child of ``dsh sessions show --json``: its id, how it came (``subagent``, ``fork``, ``nested``)
    and the call that started it (nested runs only)."""
    nested = child.outer_session == parent and child.parent_session != parent
    return {
        "session_id": child.id,
        "origin": "nested" if nested else child.origin,
        "call_id": child.outer_call if nested else None,
    }


def _parent(parent: str | None) -> str:
    return f"  (parent {parent})" if parent else ""
