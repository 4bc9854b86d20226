"""Every event the harness records matches dsh-session's event table (``dsh.session.events``).

The paths that record events are driven for real (a model turn with hooks of every kind, a
subagent, a failing model, an interrupted turn, an outside loop with a refused call id, ``dsh exec``
and ``dsh sessions fork`` as processes), then every stored event is checked: a field recorded
without being listed fails here, and so does an event type the table lacks. Each listed type must
be seen, so a new path needs a scenario here before its type can be listed.
"""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import Agent, ModelStep, ScriptedModel, ToolCall
from dsh.harness import Harness
from dsh.session import SESSIONS, SessionEvent
from dsh.session.events import EVENTS, event_problems
from tests.helpers import dsh, harness


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _hooks(tmp_path: Path) -> dict[str, Any]:
    """Hooks that make every hook-driven record: a rewrite with context, a post-call context, a
    Stop block (once), a StopFailure, a background hook, and a hook that fails with stderr."""
    rewrite = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"command": "echo rewritten"},
            "additionalContext": "pre context",
        },
        "systemMessage": "checked",
    }
    marker = tmp_path / "stopped-once"
    stop = _script(
        tmp_path / "stop.sh",
        f'if [ -e {marker} ]; then exit 0; fi; touch {marker}; echo \'{{"decision":"block","reason":"one more"}}\'\n',
    )
    post = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "post context"}}
    return {
        "claude": {
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": "Bash",
                        "hooks": [
                            {"type": "command", "command": f"echo '{json.dumps(rewrite)}'"},
                            {"type": "command", "command": "echo failing >&2; exit 1"},
                            {"type": "command", "command": "sleep 0.2", "async": True},
                        ],
                    }
                ],
                "PostToolUse": [
                    {"matcher": "Bash", "hooks": [{"type": "command", "command": f"echo '{json.dumps(post)}'"}]}
                ],
                "Stop": [{"hooks": [{"type": "command", "command": stop}]}],
                "StopFailure": [{"hooks": [{"type": "command", "command": "true"}]}],
                "SubagentStart": [{"hooks": [{"type": "command", "command": "true"}]}],
            }
        }
    }


class _Failing(ScriptedModel):
    async def step(self, session: Any, tools: Any) -> ModelStep:
        raise RuntimeError("the provider went away")


def _events(store: Any, session_ids: Iterable[str]) -> list[SessionEvent]:
    return [e for sid in session_ids for e in store.resume(sid).history]


def test_every_recorded_event_is_listed_in_the_table(tmp_path: Path) -> None:
    runtime = harness(
        tmp_path,
        plugins=[
            {"id": "bash-local", "name": "bash-local"},
            {"id": "bash-env", "name": "bash-env"},
            {"id": "tool-bash", "name": "tool-bash"},
            {"id": "hooks", "name": "hooks", "config": _hooks(tmp_path)},
        ],
    )
    ids: list[str] = []
    try:
        store = runtime.ctx.require(SESSIONS)
        session = store.create(str(tmp_path))
        ids.append(session.id)
        model = ScriptedModel(
            [
                [
                    ModelStep(
                        text="looking",
                        reasoning="think",
                        usage={"input_tokens": 3, "output_tokens": 2},
                        tool_calls=[
                            ToolCall(name="bash", arguments={"command": "echo hi"}),
                            ToolCall(name="spawn_agent", arguments={"agent_type": "helper", "prompt": "look"}),
                            ToolCall(name="bash", error="arguments were not JSON"),
                        ],
                    ),
                    ModelStep(text="done"),
                    ModelStep(text="really done"),
                ]
            ],
            {"helper": [ModelStep(text="child done")]},
        )
        agent = Agent(runtime.ctx, session, model)
        turn = asyncio.run(agent.run_turn("go"))
        assert turn.text == "really done"
        child = turn.tool_results[1][1].data["session_id"]
        ids.append(child)
        with pytest.raises(RuntimeError):
            asyncio.run(Agent(runtime.ctx, session, _Failing([])).run_turn("fail"))

    finally:
        runtime.close()

    # A turn cancelled mid-command (as a signal cancels it), in a deployment without the rewriting hook.
    runtime = harness(tmp_path)
    try:
        again = runtime.ctx.require(SESSIONS).resume(session.id)
        sleeper = ScriptedModel([[ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "sleep 30"})])]])

        async def interrupted() -> None:
            task = asyncio.ensure_future(Agent(runtime.ctx, again, sleeper).run_turn("wait"))
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(interrupted())
    finally:
        runtime.close()

    # A command that began in a run killed before its turn was stored: its write-ahead record.
    runtime = harness(tmp_path)
    try:
        killed = runtime.ctx.require(SESSIONS).create(str(tmp_path), lock=True)
        killed.begin("call-killed", name="bash", arguments={"command": "sleep 30"}, turn_id=killed.new_turn_id())
        killed.release()  # no flush: as SIGKILL leaves it
        ids.append(killed.id)
    finally:
        runtime.close()

    # An outside loop: a call id that breaks the session-id rule is replaced and kept as supplied.
    with Harness(deployment={"dsh_home": str(tmp_path / "home")}) as outside, outside.session(cwd=tmp_path) as s:
        with s.turn("by hand") as t:
            assert not t.call("bash", {"command": "true"}, call_id="bad id with spaces").is_error
        ids.append(s.id)

    home = tmp_path / "home"
    run = dsh("exec", "--json", "--", "echo exec", home=home)
    assert run.returncode == 0, run.stderr
    executed = json.loads(run.stdout)["session_id"]
    forked = dsh("sessions", "fork", executed, home=home)
    assert forked.returncode == 0, forked.stderr
    ids += [executed, forked.stdout.split()[-1]]

    runtime = harness(tmp_path)
    try:
        events = _events(runtime.ctx.require(SESSIONS), ids)
    finally:
        runtime.close()
    problems = [p for e in events for p in event_problems(e.type, e.data, strict=True)]
    assert problems == []
    assert set(EVENTS) - {e.type for e in events} == set(), "a listed type no scenario here records"
    sources = {e.data.get("source") for e in events if e.type == "turn/start"}
    assert {"exec", "outside"} <= sources
