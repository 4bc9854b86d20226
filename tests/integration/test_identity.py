"""Per-call identity: DSH_TOOL_CALL_ID and DSH_TURN_ID through the real loop, and calls without an agent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from dsh.bash import SHELL_EXECUTOR, BashExecRequest
from dsh.bash_env import BASH_ENV
from dsh.session import ToolExecution
from tests.helpers import dsh, harness

PROBE = 'echo "$DSH_SESSION_ID|$DSH_TOOL_CALL_ID|$DSH_TURN_ID"'


def _calls(home: Path, session_id: str) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    events = json.loads(dsh("sessions", "show", session_id, "--json", home=home).stdout)["events"]
    return [e["data"] for e in events if e["type"] == "tool/call"], [e for e in events if e["type"] == "turn/start"]


@pytest.mark.integration
def test_parent_and_subagent_calls_each_see_their_own_call_and_turn(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "script.json"
    bash = {"name": "bash", "arguments": {"command": PROBE}}
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"user": "one", "steps": [{"tool_calls": [bash]}]},
                    {
                        "user": "two",
                        "steps": [
                            {
                                "tool_calls": [
                                    bash,
                                    {"name": "spawn_agent", "arguments": {"agent_type": "h", "prompt": "p"}},
                                ]
                            }
                        ],
                    },
                ],
                "subagents": {"h": [{"tool_calls": [bash]}, {"text": "child done"}]},
            }
        )
    )
    run = dsh("run", "--script", str(script), "--json", home=home)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    parent = out["session_id"]
    printed = [out["turns"][0]["tool_calls"][0]["output"], out["turns"][1]["tool_calls"][0]["output"]]
    child_id = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    (child,) = [s["id"] for s in child_id if s["id"] != parent]

    parent_calls, parent_turns = _calls(home, parent)
    bash_calls = [c for c in parent_calls if c["name"] == "bash"]
    for text, call, turn in zip(printed, bash_calls, parent_turns, strict=True):
        session_id, call_id, turn_id = text.split("[exit code")[0].strip().split("|")
        assert (session_id, call_id, turn_id) == (parent, call["call_id"], turn["data"]["turn_id"])
    assert bash_calls[0]["call_id"] != bash_calls[1]["call_id"]
    assert parent_turns[0]["data"]["turn_id"] != parent_turns[1]["data"]["turn_id"]

    child_calls, child_turns = _calls(home, child)
    child_result = next(
        e["data"]
        for e in json.loads(dsh("sessions", "show", child, "--json", home=home).stdout)["events"]
        if e["type"] == "tool/result"
    )
    assert child_result["output"].split("[exit code")[0].strip().split("|") == [
        child,
        child_calls[0]["call_id"],
        child_turns[0]["data"]["turn_id"],
    ]


@pytest.mark.integration
def test_dsh_env_lists_the_per_call_keys_as_builtins(tmp_path: Path) -> None:
    home = tmp_path / "home"
    rows = {r["key"]: r for r in json.loads(dsh("env", "--json", home=home).stdout)["variables"]}
    for key in ("DSH_TOOL_CALL_ID", "DSH_TURN_ID"):
        assert rows[key]["builtin"] and rows[key]["owner"] == "bash-env", key
    made = json.loads(dsh("exec", "--json", "--", "echo $DSH_TOOL_CALL_ID", home=home).stdout)
    values = {
        r["key"]: r.get("value")
        for r in json.loads(dsh("env", "--json", "--session", made["session_id"], home=home).stdout)["variables"]
    }
    assert values["DSH_SESSION_ID"] == made["session_id"]
    assert values["DSH_TOOL_CALL_ID"] is None and values["DSH_TURN_ID"] is None, "no call is running"
    shown = json.loads(dsh("sessions", "show", made["session_id"], "--json", home=home).stdout)["events"]
    (call,) = [e["data"] for e in shown if e["type"] == "tool/call"]
    assert made["stdout"] == f"{call['call_id']}\n"


def test_a_call_without_an_agent_gets_home_and_shell_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin that uses the executor directly, with no agent: only DSH_HOME and DSH_SHELL reach the child."""
    for key in ("DSH_SESSION_ID", "DSH_TOOL_CALL_ID", "DSH_TURN_ID", "DSH_SESSION_JSONL"):
        monkeypatch.setenv(key, "stale-from-outside")
    runtime = harness(tmp_path)
    try:
        snapshot = runtime.ctx.require(BASH_ENV).collect(ToolExecution("bash", "plugin-call", turn_id="t"))
        request = BashExecRequest(command="env | grep ^DSH_ | sort", dsh_env=snapshot, timeout=30)
        result = asyncio.run(runtime.ctx.require(SHELL_EXECUTOR).run(request))
    finally:
        runtime.close()
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [f"DSH_HOME={tmp_path / 'home'}", "DSH_SHELL=1"]
