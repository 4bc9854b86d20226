from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.agent import Agent, ModelStep, ScriptedModel, ToolCall
from dsh.loader import Runtime
from dsh.persistence.jsonl import JsonlPersistence
from dsh.session import SESSIONS
from tests.helpers import BAD_CONTRIBUTOR_PLUGINS, harness


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = harness(tmp_path)
    yield rt
    rt.close()


def _bash(command: str) -> ToolCall:
    return ToolCall(name="bash", arguments={"command": command})


def test_turn_lifecycle_and_flush_checkpoint(runtime: Runtime, tmp_path: Path) -> None:
    session = runtime.ctx.require(SESSIONS).create(tmp_path)
    path = Path(session.locate().path)  # type: ignore[union-attr]
    probe = f"test -e {path} && echo exists || echo absent; wc -l < {path} 2>/dev/null || true"
    model = ScriptedModel(
        [
            [ModelStep(text="look", tool_calls=[_bash(probe)]), ModelStep(text="done")],
            [ModelStep(tool_calls=[_bash(probe)]), ModelStep(text="again")],
        ]
    )
    agent = Agent(runtime.ctx, session, model)
    first = asyncio.run(agent.run_turn("hello"))
    assert first.text == "done"
    assert first.tool_results[0][1].data["stdout"] == "absent\n"
    types = [json.loads(line)["type"] for line in path.read_text().splitlines()]
    assert types == [
        "session/header",
        "turn/start",
        "message/user",
        "model/request",
        "message/assistant",
        "tool/call",
        "tool/result",
        "message/assistant",
        "turn/end",
        "session/flush",
    ]
    second = asyncio.run(agent.run_turn("again"))
    # During the second turn the file holds exactly the first turn's flushed prefix.
    assert second.tool_results[0][1].data["stdout"] == f"exists\n{len(types)}\n"


def test_resume_keeps_id_and_transcript_path(runtime: Runtime, tmp_path: Path) -> None:
    store = runtime.ctx.require(SESSIONS)
    session = store.create(tmp_path)
    agent = Agent(
        runtime.ctx,
        session,
        ScriptedModel([[ModelStep(tool_calls=[_bash('echo "$DSH_SESSION_ID $DSH_SESSION_JSONL"')])]]),
    )
    before = asyncio.run(agent.run_turn("one")).tool_results[0][1].data["stdout"]
    resumed = store.resume(session.id)
    again = Agent(
        runtime.ctx,
        resumed,
        ScriptedModel([[ModelStep(tool_calls=[_bash('echo "$DSH_SESSION_ID $DSH_SESSION_JSONL"')])]]),
    )
    after = asyncio.run(again.run_turn("two")).tool_results[0][1].data["stdout"]
    assert before == after == f"{session.id} {session.locate().path}\n"  # type: ignore[union-attr]
    assert [e.data["text"] for e in store.resume(session.id).history if e.type == "message/user"] == ["one", "two"]


def test_subagent_gets_its_own_session_and_parent_is_recorded(runtime: Runtime, tmp_path: Path) -> None:
    store = runtime.ctx.require(SESSIONS)
    session = store.create(tmp_path)
    echo = 'sleep 0.1; echo "$DSH_SESSION_ID $DSH_SESSION_JSONL"'
    model = ScriptedModel(
        [
            [
                ModelStep(
                    tool_calls=[
                        _bash(echo),
                        ToolCall(name="spawn_agent", arguments={"agent_type": "helper", "prompt": "p"}),
                    ]
                ),
                ModelStep(text="parent done"),
            ]
        ],
        {"helper": [ModelStep(tool_calls=[_bash(echo)]), ModelStep(text="child done")]},
    )
    agent = Agent(runtime.ctx, session, model)
    turn = asyncio.run(agent.run_turn("go"))
    parent_out = turn.tool_results[0][1].data["stdout"]
    spawn = turn.tool_results[1][1]
    child_id = spawn.data["session_id"]
    assert spawn.output == "child done"
    assert child_id != session.id
    assert parent_out == f"{session.id} {session.locate().path}\n"  # type: ignore[union-attr]
    child = store.resume(child_id)
    assert child.header.parent_session == session.id and child.header.origin == "subagent"
    assert child.header.delegation_depth == 1
    child_out = next(e for e in child.history if e.type == "tool/result").data["data"]["stdout"]
    assert child_out == f"{child_id} {spawn.data['location']['path']}\n"
    assert spawn.data["location"]["path"] != session.locate().path  # type: ignore[union-attr]
    assert JsonlPersistence.load_file(spawn.data["location"]["path"]).header.id == child_id


def test_contributor_failure_is_recorded_in_the_transcript(tmp_path: Path) -> None:
    rt = harness(tmp_path, plugins=BAD_CONTRIBUTOR_PLUGINS)
    try:
        session = rt.ctx.require(SESSIONS).create(tmp_path)
        agent = Agent(rt.ctx, session, ScriptedModel([[ModelStep(tool_calls=[_bash("echo x")])]]))
        asyncio.run(agent.run_turn("go"))
        stored = rt.ctx.require(SESSIONS).resume(session.id)
        (result,) = [e for e in stored.history if e.type == "tool/result"]
        assert (
            result.data["is_error"]
            and "contributor 'bad' returned undeclared key 'DSH_NOT_DECLARED'" in result.data["output"]
        )
    finally:
        rt.close()


def test_unknown_tool_and_exhausted_script(runtime: Runtime, tmp_path: Path) -> None:
    session = runtime.ctx.require(SESSIONS).create(tmp_path)
    agent = Agent(runtime.ctx, session, ScriptedModel([[ModelStep(tool_calls=[ToolCall(name="teleport")])]]))
    turn = asyncio.run(agent.run_turn("go"))
    assert turn.tool_results[0][1].is_error and "no tool named 'teleport'" in turn.tool_results[0][1].output
    assert turn.text == ""
    with pytest.raises(Exception, match="no subagent 'ghost'"):
        ScriptedModel([]).subagent("ghost")
