"""The ``dsh`` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import traceback
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from dsh.bash_env import BASH_ENV, TOOL_CALL_ID_KEY, TURN_ID_KEY
from dsh.core import DshError, Fiber
from dsh.loader import Runtime
from dsh.session import (
    SESSIONS,
    AgentRef,
    Session,
    SessionLockedError,
    SessionNotFoundError,
    SessionStore,
    ToolExecution,
)

from ._args import FAILURE_EXIT, build_parser, choose_deployment, command_line, exec_notices, exec_status
from ._exec import exec_command, location_json, notice_line
from ._loop import Agent
from ._model import ScriptedModel, load_script
from ._runtime import open_runtime
from ._serve import serve
from ._show import render

if TYPE_CHECKING:
    from dsh.hooks import Notice


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that interrupt ``dsh exec`` and ``dsh run``: the command's group is killed, the turn flushed."""


def _interruptible(main: Coroutine[Any, Any, int]) -> int:
    """Run ``main``; on SIGINT, SIGTERM or SIGHUP cancel it (its finally blocks flush) and exit 128+N."""

    async def runner() -> int:
        loop = asyncio.get_running_loop()
        work = asyncio.ensure_future(main)
        caught: list[signal.Signals] = []

        def interrupt(sig: signal.Signals) -> None:
            if not caught:
                caught.append(sig)
                work.cancel(sig.name)

        for sig in INTERRUPTS:
            loop.add_signal_handler(sig, interrupt, sig)
        try:
            await asyncio.wait({work})
        finally:
            for sig in INTERRUPTS:
                loop.remove_signal_handler(sig)
        if not caught:
            return work.result()
        if not work.cancelled() and work.exception() is not None:
            print(f"dsh: {work.exception()}", file=sys.stderr)
        print(
            f"dsh: interrupted by {caught[0].name}: a running command's process group was killed "
            "and the turn recorded as interrupted",
            file=sys.stderr,
        )
        return 128 + caught[0].value

    return asyncio.run(runner())


def _open_session(store: SessionStore, session_id: str | None, cwd: str | None) -> tuple[Session, str]:
    # The write lock comes first: hooks and the first turn run only once the turn can be recorded.
    if session_id is not None:
        return store.resume(session_id, lock=True), "resume"
    return store.create(cwd, lock=True), "startup"


async def _exec(args: argparse.Namespace) -> int:
    command = command_line(args.command)
    if not command:
        raise DshError("dsh exec needs a command after --")
    runtime = open_runtime(choice=args.choice)
    try:
        outcome = await exec_command(runtime, command, session_id=args.session, cwd=args.cwd, timeout=args.timeout)
    finally:
        runtime.close()
    for line in outcome.notices:
        print(line, file=sys.stderr)
    result = outcome.as_json()
    if args.json:
        _print_json(result)
    else:
        sys.stdout.write(outcome.stdout)
        sys.stdout.flush()
        sys.stderr.write(outcome.stderr)
    for line in exec_notices(result):
        print(line, file=sys.stderr)
    return exec_status(result)


async def _serve(args: argparse.Namespace) -> int:
    runtime = open_runtime(choice=args.choice)
    try:
        return await serve(runtime, args.choice.path, idle_timeout=args.idle_timeout)
    finally:
        runtime.close()


async def _run(args: argparse.Namespace) -> int:
    script = load_script(args.script)
    runtime = open_runtime(choice=args.choice)
    try:
        session, source = _open_session(runtime.ctx.require(SESSIONS), args.session, None)
        messages: list[str] = []

        def notify(notice: Notice) -> None:
            # Hook failures are warnings on stderr at once; systemMessage lines are part of the output.
            if notice.kind == "warning":
                print(notice_line(notice), file=sys.stderr, flush=True)
            elif args.json:
                messages.append(notice.text)
            else:
                print(f"[hook] {notice.text}", flush=True)

        if not args.json:
            print(f"session {session.id}", flush=True)
        try:
            agent = Agent(runtime.ctx, session, ScriptedModel.from_script(script), notify=notify)
            started = await agent.start(source)
        except BaseException:
            session.release()
            raise
        turns: list[dict[str, Any]] = []
        for scripted in [] if started.stop else script.turns:
            result = await agent.run_turn(scripted.user)
            turns.append(
                {
                    "turn_id": result.turn_id,
                    "text": result.text,
                    "blocked": result.blocked,
                    "stopped": result.stopped,
                    "tool_calls": [
                        {"name": c.name, "arguments": c.arguments, "output": r.output, "is_error": r.is_error}
                        for c, r in result.tool_results
                    ],
                }
            )
            if not args.json:
                _print_turn(turns[-1])
            if result.stopped is not None:
                break  # a hook's "continue": false ends the run, as it ends the peer's session
        await agent.end()
        session.release()  # held since _open_session when no turn ran
        stopped = started.reason if started.stop else None
        if args.json:
            _print_json(
                {
                    "session_id": session.id,
                    "location": location_json(session),
                    "turns": turns,
                    "stopped": stopped,
                    "hook_messages": messages,
                }
            )
        else:
            if stopped is not None:
                print(f"[stopped by a SessionStart hook: {stopped}]")
        return 0
    finally:
        runtime.close()


def _print_turn(turn: dict[str, Any]) -> None:
    for call in turn["tool_calls"]:
        print(f"$ {call['name']} {json.dumps(call['arguments'])}\n{call['output']}")
    if turn["stopped"]:
        print(f"[turn stopped by a hook: {turn['stopped']}]")
    elif turn["blocked"]:
        print(f"[turn blocked: {turn['blocked']}]")
    if turn["text"]:
        print(turn["text"])


def _env(args: argparse.Namespace) -> int:
    runtime = open_runtime(choice=args.choice)
    try:
        registry = runtime.ctx.require(BASH_ENV)
        values: dict[str, str] = {}
        if args.session is not None:
            header = runtime.ctx.require(SESSIONS).resume(args.session, history=False).header
            values = dict(registry.collect(ToolExecution("bash", "dsh-env", agent=AgentRef("main", header))))
            # No call or turn is running: their ids have no value to show.
            for key in (TOOL_CALL_ID_KEY, TURN_ID_KEY):
                values.pop(key, None)
        rows = []
        for info in registry.list():
            row: dict[str, Any] = {
                "key": info.key,
                "owner": info.owner,
                "distribution": info.distribution,
                "version": info.version,
                "builtin": info.builtin,
                "description": info.description,
            }
            if args.session:
                row["value"] = values.get(info.key)
            rows.append(row)
        if args.json:
            _print_json({"session_id": args.session, "variables": rows})
        else:
            for row in rows:
                dist = " ".join(str(p) for p in (row["distribution"], row["version"]) if p) or "in-process"
                owner = f"{row['owner']} ({dist})"
                value = f" = {row['value']}" if args.session and row["value"] is not None else ""
                tag = " [built-in]" if row["builtin"] else ""
                print(f"{row['key']}{value}\n    {row['description']}\n    owner: {owner}{tag}")
        return 0
    finally:
        runtime.close()


def _plugin_rows(runtime: Runtime) -> list[dict[str, Any]]:
    by_origin: dict[tuple[str, str], Fiber] = {}
    for live in runtime.fibers():
        if live.origin is not None:
            by_origin[(live.origin.group, live.origin.name)] = live
    rows = []
    for group in runtime.catalog.groups():
        for item in runtime.catalog.items(group):
            fiber = by_origin.get((group, item.name))
            errors = [] if fiber is None else [e for e in (fiber.error, *fiber.dispose_errors) if e]
            rows.append(
                {
                    "group": group,
                    "name": item.name,
                    "distribution": item.distribution,
                    "version": item.version,
                    "state": "not loaded" if fiber is None else fiber.state.value,
                    "entry": None if fiber is None else fiber.label,
                    "error": "; ".join(errors) or None,
                }
            )
        for name, message in runtime.catalog.conflicts(group).items():
            rows.append(
                {
                    "group": group,
                    "name": name,
                    "distribution": None,
                    "version": None,
                    "state": "failed",
                    "entry": None,
                    "error": message,
                }
            )
    for entry_id, fiber in runtime.entries.items():
        if fiber.origin is None:
            rows.append(
                {
                    "group": "deployment",
                    "name": fiber.name,
                    "distribution": None,
                    "version": None,
                    "state": fiber.state.value,
                    "entry": entry_id,
                    "error": fiber.error,
                }
            )
    for entry_id, message in runtime.failures.items():
        rows.append(
            {
                "group": "deployment",
                "name": entry_id,
                "distribution": None,
                "version": None,
                "state": "failed",
                "entry": entry_id,
                "error": message,
            }
        )
    return rows


def _plugins(args: argparse.Namespace) -> int:
    runtime = open_runtime(choice=args.choice, check=False)
    try:
        rows = _plugin_rows(runtime)
        choice = args.choice
        if args.json:
            deployment = {"path": choice.path, "reason": choice.reason}
            _print_json({"deployment": deployment, "plugins": rows, "problems": runtime.problems()})
        else:
            print(f"deployment: {choice.path or 'built-in default'} ({choice.reason})")
            for row in rows:
                dist = f"{row['distribution']} {row['version']}" if row["distribution"] else "-"
                print(f"{row['group']:<16} {row['name']:<24} {dist:<32} {row['state']}")
                if row["error"]:
                    print(f"    error: {row['error']}")
        return 0
    finally:
        runtime.close()


def _migrate(runtime: Runtime) -> int:
    """``dsh sessions migrate``: apply the backend's schema migrations, if it has any."""
    backend = runtime.ctx.require(SESSIONS).persistence()
    migrate = getattr(backend, "migrate", None)
    if migrate is None:
        print(f"the {runtime.deployment.persistence.backend} backend keeps no schema: nothing to migrate")
        return 0
    before, after = migrate()
    print(
        f"{getattr(backend, 'where', repr(backend))}: schema version {after}"
        + (f" (was {before})" if before != after else " (up to date)")
    )
    return 0


def _sessions(args: argparse.Namespace) -> int:
    runtime = open_runtime(choice=args.choice)
    try:
        if args.action == "migrate":
            return _migrate(runtime)
        store = runtime.ctx.require(SESSIONS)
        if args.action == "list":
            scan = store.scan()
            headers = scan.headers
            # One damaged transcript never hides the others: each is one line on stderr.
            for line in scan.damaged:
                print(f"dsh: warning: skipped a damaged session: {line}", file=sys.stderr)
            if args.json:
                _print_json({"sessions": [h.model_dump(mode="json") for h in headers], "damaged": list(scan.damaged)})
            else:
                for h in headers:
                    print(
                        f"{h.id}  {h.created_at}  {h.cwd}"
                        + (f"  (parent {h.parent_session})" if h.parent_session else "")
                    )
            return 0
        session = store.resume(args.id, history=args.action != "locate")
        location = location_json(session)
        if args.action == "locate":
            if args.json:
                _print_json({"session_id": session.id, "location": location})
            elif location is None:
                print(f"session {session.id} has no local transcript file")
            else:
                print(location["path"])
            return 0
        events = [e.model_dump(mode="json") for e in session.history]
        if args.json:
            _print_json(
                {
                    "header": session.header.model_dump(mode="json"),
                    "location": location,
                    "events": events,
                    "damage": list(session.damage),
                }
            )
        else:
            path = location["path"] if location else None
            sys.stdout.writelines(line + "\n" for line in render(session.header, path, session.history))
            for line in session.damage:
                print(f"damage: {line}", file=sys.stderr)
        return 0
    finally:
        runtime.close()


def _own_session_hint(args: argparse.Namespace, exc: BaseException) -> str:
    """Why the session of the very shell running this command cannot be opened yet, if that is the case."""
    wanted = getattr(args, "session", None) or getattr(args, "id", None)
    if not wanted or wanted != os.environ.get("DSH_SESSION_ID"):
        return ""
    if isinstance(exc, SessionNotFoundError):
        return (
            f" (session {wanted} is the one this shell belongs to: its first turn is still running and is "
            "written when that turn ends)"
        )
    if isinstance(exc, SessionLockedError):
        return f" (session {wanted} is the one this shell belongs to: its current turn holds it until the turn ends)"
    return ""


def dispatch(args: argparse.Namespace) -> int:
    """Run a parsed ``dsh`` command line in this process; return the exit status."""
    # The command reports failures itself (boot report, warnings); --debug adds the library's log.
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.CRITICAL, format="dsh: %(name)s: %(message)s")
    try:
        args.choice = choose_deployment(getattr(args, "deployment", None))
        if args.verb == "exec":
            return _interruptible(_exec(args))
        if args.verb == "serve":
            return asyncio.run(_serve(args))
        if args.verb == "run":
            return _interruptible(_run(args))
        if args.verb == "env":
            return _env(args)
        if args.verb == "plugins":
            return _plugins(args)
        if args.verb == "skills":
            from ._skills_cmd import skills

            return skills(args)
        if args.action in ("fork", "verify"):
            from . import _sessions_cmd

            return _sessions_cmd.fork(args) if args.action == "fork" else _sessions_cmd.verify(args)
        return _sessions(args)
    except (DshError, OSError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"dsh: {exc}{_own_session_hint(args, exc)}", file=sys.stderr)
        # `dsh exec` keeps 0-124 and 126+ for the command, as `timeout` and `env` do.
        return FAILURE_EXIT if args.verb == "exec" else 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dsh`` in this process (never through ``dsh serve``); return the exit status."""
    return dispatch(build_parser().parse_args(argv))
