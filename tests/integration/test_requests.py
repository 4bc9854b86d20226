"""Recorded model requests: the transcript shows the tools the model was offered, byte for byte."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import Agent, ModelStep, ScriptedModel, ToolCall
from dsh.session import SESSIONS, TOOLS, ToolExecution, ToolResult, ToolSpec
from tests.helpers import dsh, harness

BASH_SNAPSHOT = (
    "Run a command in a fresh, non-interactive bash shell and return its output and exit code. "
    "The working directory defaults to the session's; `workdir` overrides it. Set `run_in_background` "
    "for long-running commands and read them later with the companion output tool. "
    "The harness describes the current session and environment through managed $DSH_* environment "
    "variables, set anew for every call; inspect them (for example `env | grep ^DSH_`) when you need "
    "facts about the current harness."
)
PWSH_SNAPSHOT = (
    "Run a command in a fresh, non-interactive PowerShell (pwsh) session and return its output and exit code. "
    "The working directory defaults to the session's; `workdir` overrides it. Set `run_in_background` "
    "for long-running commands and read them later with the companion output tool. "
    "The harness describes the current session and environment through managed $env:DSH_* environment "
    "variables, set anew for every call; inspect them (for example `Get-ChildItem env:DSH_*`) when you "
    "need facts about the current harness."
)

SCRIPT = {
    "model": "scripted-snapshot",
    "turns": [
        {"user": "one", "steps": [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}, {"text": "a"}]},
        {"user": "two", "steps": [{"text": "b"}]},
    ],
}


def recorded_requests(home: Path, session_id: str, deployment: Path | None = None) -> list[dict[str, Any]]:
    """The data of every ``model/request`` event of a stored session, read through ``dsh sessions show``."""
    extra = ["--deployment", str(deployment)] if deployment else []
    shown = dsh("sessions", "show", session_id, "--json", *extra, home=home)
    assert shown.returncode == 0, shown.stderr
    return [e["data"] for e in json.loads(shown.stdout)["events"] if e["type"] == "model/request"]


@pytest.mark.integration
def test_requests_are_recorded_once_per_turn_and_pin_the_shell_descriptions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    deployment = tmp_path / "d.yaml"
    deployment.write_text("plugins:\n  - {id: tool-pwsh}\n")  # added to the default set
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    run = dsh("run", "--script", str(script), "--deployment", str(deployment), "--json", home=home)
    assert run.returncode == 0, run.stderr
    session_id = json.loads(run.stdout)["session_id"]
    requests = recorded_requests(home, session_id, deployment)
    assert len(requests) == 2, "one per turn: the tools did not change within either turn"
    first = requests[0]
    assert first["model"] == "scripted-snapshot"
    tools = {t["name"]: t for t in first["tools"]}
    assert list(tools) == sorted(tools), "tools are offered in a stable (sorted) order"
    assert tools["bash"]["description"] == BASH_SNAPSHOT
    assert tools["pwsh"]["description"] == PWSH_SNAPSHOT
    assert tools["bash"]["parameters"]["required"] == ["command"]
    assert set(tools["bash"]["parameters"]["properties"]) == {
        "command",
        "description",
        "timeout",
        "workdir",
        "run_in_background",
    }
    for tool in first["tools"]:
        # The generic convention only: no description names a concrete key such as DSH_SESSION_JSONL.
        assert re.search(r"DSH_[A-Za-z0-9]", tool["description"]) is None, tool["name"]
        assert "JSONL" not in tool["description"].upper() and "SQLITE" not in tool["description"].upper()
    assert requests[1] == first


class _Grower:
    """A tool that registers another tool when called, so the offer changes within a turn."""

    spec = ToolSpec("grow", "Add a tool.", {"type": "object", "properties": {}})

    def __init__(self, register: Any) -> None:
        self._register = register

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        self._register()
        return ToolResult("grown")


class _Extra:
    spec = ToolSpec("extra", "An added tool.", {"type": "object", "properties": {}})

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        return ToolResult("extra")


def test_a_request_is_recorded_again_when_the_offer_changes_within_a_turn(tmp_path: Path) -> None:
    runtime = harness(tmp_path)
    try:
        tools = runtime.ctx.require(TOOLS)
        tools.register(_Grower(lambda: tools.register(_Extra())))
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        model = ScriptedModel(
            [
                [
                    ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "true"})]),
                    ModelStep(tool_calls=[ToolCall(name="grow")]),
                    ModelStep(text="done"),
                ]
            ]
        )
        asyncio.run(Agent(runtime.ctx, session, model).run_turn("go"))
        types = [e.type for e in session.history]
        requests = [e.data for e in session.history if e.type == "model/request"]
        assert len(requests) == 2
        assert "extra" not in [t["name"] for t in requests[0]["tools"]]
        assert "extra" in [t["name"] for t in requests[1]["tools"]]
        assert requests[0]["tools_sha256"] != requests[1]["tools_sha256"]
        # The second request comes right before the step that was offered the new tool.
        assert types.index("model/request", types.index("tool/result", types.index("tool/call") + 1)) > 0
    finally:
        runtime.close()


def test_switching_backends_in_a_running_harness_leaves_the_offer_unchanged(tmp_path: Path) -> None:
    """The persistence service replaced between turns (jsonl, then sqlite): the next request is byte-identical."""
    from dsh.persistence.sqlite import plugin as sqlite_plugin

    runtime = harness(tmp_path)
    try:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        bash = ToolCall(name="bash", arguments={"command": 'echo "${DSH_SESSION_JSONL-none}"'})
        model = ScriptedModel([[ModelStep(tool_calls=[bash])], [ModelStep(tool_calls=[bash])]])
        agent = Agent(runtime.ctx, session, model)
        first = asyncio.run(agent.run_turn("on jsonl"))
        runtime.entries["persistence"].reload(sqlite_plugin, {})
        second = asyncio.run(agent.run_turn("on sqlite"))
    finally:
        runtime.close()
    assert first.tool_results[0][1].data["stdout"].endswith(".jsonl\n")
    assert second.tool_results[0][1].data["stdout"] == "none\n", "the switch took effect for the next call"
    requests = [json.dumps(e.data, ensure_ascii=False) for e in session.history if e.type == "model/request"]
    assert len(requests) == 2 and requests[0] == requests[1]
    assert (tmp_path / "home" / "sessions.sqlite3").exists()
