"""The ``dsh run`` verb: a model provider (or the scripted model) driving the agent loop, turn by turn."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from dsh.agent import Agent, ScriptedModel
from dsh.agent.script import load_script
from dsh.bash_env import outer_claim
from dsh.harness import notice_line
from dsh.session import SESSIONS, Session, SessionStore

from ._errors import UsageError
from ._exec import location_json
from ._open import open_runtime
from ._output import print_json, say

if TYPE_CHECKING:
    from dsh.hooks import Notice


def _open_session(store: SessionStore, session_id: str | None, cwd: str | None) -> tuple[Session, str]:
    # The write lock comes first: hooks and the first turn run only once the turn can be recorded.
    if session_id is not None:
        return store.resume(session_id, lock=True), "resume"
    return store.create(cwd, lock=True, **outer_claim(os.environ)), "startup"


async def run_verb(args: argparse.Namespace) -> int:
    """``dsh run``: with ``--script FILE`` the scripted model's turns, else real turns with a provider.

    Exit 0, or 1 when a turn failed (it reached ``max_steps``, or its provider failed): each failed
    turn is one ``dsh:`` line on stderr and its ``failed`` reason in ``--json``.
    """
    if args.script is None:
        from ._model_run import model_run

        return await model_run(args)
    for option in ("model", "prompt"):
        if getattr(args, option) is not None:
            raise UsageError(
                f"--{option} cannot be used with --script: a script holds its own turns and model",
                option=f"--{option}",
            )
    script = load_script(args.script)
    with open_runtime(choice=args.choice) as runtime:
        session, source = _open_session(runtime.ctx.require(SESSIONS), args.session, None)
        messages: list[str] = []

        def notify(notice: Notice) -> None:
            # Hook failures are warnings on stderr at once; systemMessage lines are part of the output.
            if notice.kind == "warning":
                print(notice_line(notice), file=sys.stderr, flush=True)
            elif args.json:
                messages.append(notice.text)
            else:
                say(f"[hook] {notice.text}")

        if not args.json:
            say(f"session {session.id}")
        try:
            agent = Agent(
                runtime.ctx, session, ScriptedModel.from_script(script), notify=notify, max_steps=args.max_steps
            )
            stopped = await agent.start(source)
        except BaseException:
            session.release()
            raise
        turns: list[dict[str, Any]] = []
        failed = False
        for scripted in [] if stopped is not None else script.turns:
            result = await agent.run_turn(scripted.user)
            if result.failed is not None:
                failed = True
                print(f"dsh: turn {result.turn_id} failed: {result.failed}", file=sys.stderr, flush=True)
            turns.append(
                {
                    "turn_id": result.turn_id,
                    "text": result.text,
                    "blocked": result.blocked,
                    "stopped": result.stopped,
                    "failed": result.failed,
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
        if args.json:
            print_json(
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
                say(f"[stopped by a SessionStart hook: {stopped}]")
        return 1 if failed else 0


def _print_turn(turn: dict[str, Any]) -> None:
    for call in turn["tool_calls"]:
        say(f"$ {call['name']} {json.dumps(call['arguments'])}\n{call['output']}")
    if turn["stopped"]:
        say(f"[turn stopped by a hook: {turn['stopped']}]")
    elif turn["blocked"]:
        say(f"[turn blocked: {turn['blocked']}]")
    if turn["text"]:
        say(turn["text"])
