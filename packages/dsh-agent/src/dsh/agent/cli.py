"""The ``dsh`` command."""

from __future__ import annotations

import os


def _skip_pydantic_plugin_scan() -> None:
    """Spare each ``dsh`` process a second full scan of installed distributions.

    pydantic looks for its own plugins with ``importlib.metadata.entry_points()`` when it builds
    the first model, re-reading every installed distribution; dsh has just done the same scan
    for its own groups. The ``dsh`` command runs without pydantic plugins unless the user set
    ``PYDANTIC_DISABLE_PLUGINS`` (then pydantic's own rules apply). Library users are unaffected.
    """
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") is not None:
        return
    try:
        from pydantic.plugin import _loader
    except ImportError:  # pragma: no cover - a pydantic without the plugin loader
        return
    if getattr(_loader, "_plugins", "absent") is None:
        _loader._plugins = {}


_skip_pydantic_plugin_scan()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

from dsh.bash_env import BASH_ENV  # noqa: E402
from dsh.core import GROUPS, DshError, Fiber, Runtime  # noqa: E402
from dsh.session import SESSIONS, AgentRef, Session, SessionStore, ToolExecution  # noqa: E402

from ._loop import Agent  # noqa: E402
from ._model import ScriptedModel, ToolCall, load_script  # noqa: E402
from ._runtime import open_runtime  # noqa: E402

BLOCKED_EXIT = 126
"""Exit status of ``dsh exec`` when a hook blocked the command (it never ran)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsh", description="Run shell commands and agents that know their session.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="verb", required=True)

    def common(p: argparse.ArgumentParser, session: bool = True) -> None:
        p.add_argument("--deployment", metavar="FILE", help="deployment YAML (default: the built-in one)")
        if session:
            p.add_argument("--session", metavar="ID", help="resume this session instead of creating one")
        p.add_argument("--json", action="store_true", help="print JSON")
        # SUPPRESS keeps `dsh --debug VERB` working: the sub-parser must not reset it to False.
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")

    p = sub.add_parser("exec", help="run COMMAND as the model's bash tool would, as one turn")
    common(p)
    p.add_argument("--cwd", metavar="DIR", help="working directory of a new session")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="kill the command after this long")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")

    p = sub.add_parser("run", help="drive the agent loop with a scripted model")
    common(p)
    p.add_argument("--script", required=True, metavar="FILE", help="YAML or JSON script of turns")

    p = sub.add_parser("env", help="the catalogue of managed DSH_* variables")
    common(p)

    p = sub.add_parser("plugins", help="discovered plugins and their state")
    common(p, session=False)

    p = sub.add_parser("sessions", help="stored sessions")
    sessions = p.add_subparsers(dest="action", required=True)
    s = sessions.add_parser("list", help="every stored session")
    common(s, session=False)
    for action in ("show", "locate"):
        s = sessions.add_parser(action, help=f"{action} one session")
        s.add_argument("id", metavar="ID")
        common(s, session=False)
    return parser


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _location(session: Session) -> dict[str, str] | None:
    location = session.locate()
    return None if location is None else {"kind": location.kind, "path": location.path}


def _open_session(store: SessionStore, session_id: str | None, cwd: str | None) -> tuple[Session, str]:
    if session_id:
        return store.resume(session_id), "resume"
    return store.create(cwd), "startup"


async def _exec(args: argparse.Namespace) -> int:
    words = list(args.command)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise DshError("dsh exec needs a command after --")
    # One word is a shell command line; several are argv words, quoted so the shell sees them as given.
    command = words[0] if len(words) == 1 else shlex.join(words)
    if args.cwd and not os.path.isdir(args.cwd):
        raise DshError(f"--cwd {args.cwd} is not a directory")
    runtime = open_runtime(args.deployment)
    try:
        session, source = _open_session(runtime.ctx.require(SESSIONS), args.session, args.cwd)
        agent = Agent(runtime.ctx, session, ScriptedModel([]))
        await agent.start(source)
        arguments: dict[str, Any] = {"command": command}
        if args.timeout is not None:
            arguments["timeout"] = args.timeout
        result = await agent.run_tool_turn(ToolCall(name="bash", arguments=arguments))
        data = result.data
        if "exit_code" in data:
            code, stdout, stderr = int(data["exit_code"]), str(data["stdout"]), str(data["stderr"])
        else:
            code = BLOCKED_EXIT if data.get("blocked") else 1
            stdout, stderr = "", result.output + "\n"
        if args.json:
            _print_json(
                {
                    "session_id": session.id,
                    "location": _location(session),
                    "exit_code": code,
                    "stdout": stdout,
                    "stderr": stderr,
                }
            )
        else:
            sys.stdout.write(stdout)
            sys.stdout.flush()
            sys.stderr.write(stderr)
        return code
    finally:
        runtime.close()


async def _run(args: argparse.Namespace) -> int:
    script = load_script(args.script)
    runtime = open_runtime(args.deployment)
    try:
        session, source = _open_session(runtime.ctx.require(SESSIONS), args.session, None)
        agent = Agent(runtime.ctx, session, ScriptedModel.from_script(script))
        await agent.start(source)
        turns: list[dict[str, Any]] = []
        for scripted in script.turns:
            result = await agent.run_turn(scripted.user)
            turns.append(
                {
                    "turn_id": result.turn_id,
                    "text": result.text,
                    "blocked": result.blocked,
                    "tool_calls": [
                        {"name": c.name, "arguments": c.arguments, "output": r.output, "is_error": r.is_error}
                        for c, r in result.tool_results
                    ],
                }
            )
        if args.json:
            _print_json({"session_id": session.id, "location": _location(session), "turns": turns})
        else:
            print(f"session {session.id}")
            for turn in turns:
                for call in turn["tool_calls"]:
                    print(f"$ {call['name']} {json.dumps(call['arguments'])}\n{call['output']}")
                if turn["blocked"]:
                    print(f"[turn blocked: {turn['blocked']}]")
                if turn["text"]:
                    print(turn["text"])
        return 0
    finally:
        runtime.close()


def _env(args: argparse.Namespace) -> int:
    runtime = open_runtime(args.deployment)
    try:
        registry = runtime.ctx.require(BASH_ENV)
        values: dict[str, str] = {}
        if args.session:
            header = runtime.ctx.require(SESSIONS).resume(args.session).header
            values = dict(registry.collect(ToolExecution("bash", "dsh-env", agent=AgentRef("main", header))))
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
    for group in GROUPS:
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
    runtime = open_runtime(args.deployment, check=False)
    try:
        rows = _plugin_rows(runtime)
        if args.json:
            _print_json({"plugins": rows, "problems": runtime.problems()})
        else:
            for row in rows:
                dist = f"{row['distribution']} {row['version']}" if row["distribution"] else "-"
                print(f"{row['group']:<16} {row['name']:<24} {dist:<32} {row['state']}")
                if row["error"]:
                    print(f"    error: {row['error']}")
        return 0
    finally:
        runtime.close()


def _sessions(args: argparse.Namespace) -> int:
    runtime = open_runtime(args.deployment)
    try:
        store = runtime.ctx.require(SESSIONS)
        if args.action == "list":
            headers = store.list()
            if args.json:
                _print_json({"sessions": [h.model_dump(mode="json") for h in headers]})
            else:
                for h in headers:
                    print(
                        f"{h.id}  {h.created_at}  {h.cwd}"
                        + (f"  (parent {h.parent_session})" if h.parent_session else "")
                    )
            return 0
        session = store.resume(args.id)
        location = _location(session)
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
            print(json.dumps(session.header.model_dump(mode="json")))
            for event in events:
                print(json.dumps(event, ensure_ascii=False))
            for line in session.damage:
                print(f"damage: {line}", file=sys.stderr)
        return 0
    finally:
        runtime.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    # The command reports failures itself (boot report, warnings); --debug adds the library's log.
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.CRITICAL, format="dsh: %(name)s: %(message)s")
    try:
        if args.verb == "exec":
            return asyncio.run(_exec(args))
        if args.verb == "run":
            return asyncio.run(_run(args))
        if args.verb == "env":
            return _env(args)
        if args.verb == "plugins":
            return _plugins(args)
        return _sessions(args)
    except (DshError, OSError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"dsh: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def run() -> None:
    """Run :func:`main` and exit with its status."""
    sys.exit(main())
