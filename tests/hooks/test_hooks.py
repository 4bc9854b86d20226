"""Hook bridges, driven through the real agent loop with real hook commands."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dsh.agent import Agent, ModelStep, ScriptedModel, ToolCall
from dsh.hooks import HOOKS, HookFacts, build_payload, interpret
from dsh.loader import Runtime
from dsh.session import SESSIONS
from tests.conftest import PEER_SCHEMAS
from tests.helpers import harness

HOOK = Path(__file__).with_name("hook_script.py")
CODEX_SCHEMAS = PEER_SCHEMAS / "codex"
CLAUDE_KEYS = json.loads((PEER_SCHEMAS / "claude" / "ts_hook_keys.json").read_text())["types"]
SCHEMA_FILES = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "user-prompt-submit",
    "PreToolUse": "pre-tool-use",
    "PostToolUse": "post-tool-use",
    "Stop": "stop",
    "SubagentStart": "subagent-start",
    "SubagentStop": "subagent-stop",
    "SessionEnd": "session-end",
}
EVENTS = [*SCHEMA_FILES, "PostToolUseFailure"]
CODEX_EVENTS = set(SCHEMA_FILES)
CLAUDE_EVENTS = set(EVENTS)


def _command(record: Path, action: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(HOOK))} {shlex.quote(str(record))} {action}"


def _table(
    record: Path, action: str = "ok", matcher: str | None = None, timeout: float | None = None
) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": _command(record, action)}
    if timeout is not None:
        hook["timeout"] = timeout
    group: dict[str, Any] = {"hooks": [hook]}
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group] for event in EVENTS}}


def _runtime(tmp_path: Path, backend: str = "jsonl", **hooks: Any) -> Runtime:
    return harness(
        tmp_path,
        backend=backend,
        plugins=[
            {"id": "bash-env", "name": "bash-env"},
            {"id": "tool-bash", "name": "tool-bash"},
            {"id": "hooks", "name": "hooks", "config": hooks},
        ],
    )


def _recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(record.glob("*.json"))]


SCRIPT = [
    ModelStep(
        text="checking",
        tool_calls=[
            ToolCall(name="bash", arguments={"command": "echo hi"}),
            ToolCall(name="spawn_agent", arguments={"agent_type": "helper", "prompt": "look"}),
        ],
    ),
    ModelStep(text="all done"),
]
SUBAGENTS = {
    "helper": [
        ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "true"})]),
        ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "false"})]),
        ModelStep(text="child done"),
    ]
}


def _drive(runtime: Runtime, tmp_path: Path, steps: list[ModelStep] = SCRIPT, prompt: str = "go") -> Agent:
    async def scenario() -> Agent:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        agent = Agent(runtime.ctx, session, ScriptedModel([steps], SUBAGENTS))
        await agent.start("startup")
        await agent.run_turn(prompt)
        await agent.end()
        return agent

    return asyncio.run(scenario())


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_codex_payloads_validate_against_codex_schemas(tmp_path: Path, backend: str) -> None:
    record = tmp_path / "rec"
    runtime = _runtime(tmp_path, backend, codex=_table(record))
    try:
        agent = _drive(runtime, tmp_path)
        location = agent.session.locate()
    finally:
        runtime.close()
    seen = {r["payload"]["hook_event_name"] for r in _recorded(record)}
    assert seen == CODEX_EVENTS, "Codex has no PostToolUseFailure: a failed call fires PostToolUse"
    for entry in _recorded(record):
        payload = entry["payload"]
        schema = json.loads(
            (CODEX_SCHEMAS / f"{SCHEMA_FILES[payload['hook_event_name']]}.command.input.schema.json").read_text()
        )
        jsonschema.validate(payload, schema)
        assert entry["env"] == {}, "hooks get no managed variables; they learn the session from stdin"
        if backend == "sqlite":
            assert payload["transcript_path"] is None
        elif payload["session_id"] == agent.session.id:
            assert location is not None and payload["transcript_path"] == location.path
    tool_events = [r["payload"] for r in _recorded(record) if r["payload"]["hook_event_name"] == "PreToolUse"]
    assert {p["tool_name"] for p in tool_events} == {"Bash", "spawn_agent"}
    _check_subagent_scoping([r["payload"] for r in _recorded(record)], agent)


def _check_subagent_scoping(payloads: list[dict[str, Any]], agent: Agent) -> None:
    """Stop and UserPromptSubmit belong to the main agent; hooks inside the subagent say which agent."""
    main = agent.session.id
    by_event: dict[str, list[dict[str, Any]]] = {}
    for p in payloads:
        by_event.setdefault(p["hook_event_name"], []).append(p)
    assert [p["session_id"] for p in by_event["UserPromptSubmit"]] == [main]
    assert [p["session_id"] for p in by_event["Stop"]] == [main]
    (start,) = by_event["SubagentStart"]
    (stop,) = by_event["SubagentStop"]
    child = start["agent_id"]
    assert start["session_id"] == stop["session_id"] == main and stop["agent_id"] == child
    assert start["agent_type"] == stop["agent_type"] == "helper"
    assert stop["last_assistant_message"] == "child done"
    inside = [p for p in payloads if p["session_id"] == child]
    assert {p["hook_event_name"] for p in inside} >= {"PreToolUse"}
    assert all(p["agent_id"] == child and p["agent_type"] == "helper" for p in inside)
    outside = [p for p in payloads if p["session_id"] == main and p["hook_event_name"] in ("PreToolUse", "Stop")]
    assert outside and all("agent_id" not in p for p in outside)


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_claude_payloads_carry_every_required_key(tmp_path: Path, backend: str) -> None:
    record = tmp_path / "rec"
    runtime = _runtime(tmp_path, backend, claude=_table(record))
    try:
        agent = _drive(runtime, tmp_path)
    finally:
        runtime.close()
    entries = _recorded(record)
    assert {e["payload"]["hook_event_name"] for e in entries} == CLAUDE_EVENTS
    payloads = [e["payload"] for e in entries]
    _check_subagent_scoping(payloads, agent)
    (spawn,) = [p for p in payloads if p["hook_event_name"] == "PreToolUse" and p["tool_name"] == "Agent"]
    assert spawn["tool_input"] == {"subagent_type": "helper", "prompt": "look"}
    (failure,) = [p for p in payloads if p["hook_event_name"] == "PostToolUseFailure"]
    assert failure["tool_input"] == {"command": "false"} and "exit code: 1" in failure["error"]
    assert not [
        p for p in payloads if p["hook_event_name"] == "PostToolUse" and p["tool_input"] == {"command": "false"}
    ]
    for entry in entries:
        payload = entry["payload"]
        keys = CLAUDE_KEYS[f"{payload['hook_event_name']}HookInput"]
        missing = set(keys["required"]) - set(payload)
        assert not missing, f"{payload['hook_event_name']} lacks {missing}"
        assert set(payload) <= set(keys["required"]) | set(keys["optional"])
        assert isinstance(payload["transcript_path"], str)
        if backend == "sqlite":
            assert payload["transcript_path"] == ""


def test_payloads_are_built_without_creating_the_transcript(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    runtime = _runtime(tmp_path, claude=_table(record))
    try:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        agent = Agent(runtime.ctx, session, ScriptedModel([]))
        asyncio.run(agent.start("startup"))
        location = session.locate()
        assert location is not None
        assert not Path(location.path).exists()
        assert not (tmp_path / "home" / "sessions").exists()
        (entry,) = _recorded(record)
        assert entry["payload"]["transcript_path"] == location.path
        assert entry["payload"]["source"] == "startup"
    finally:
        runtime.close()


def test_claude_hook_blocks_rm_rf_with_exit_2(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    table = {
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": _command(record, "block-rm")}]}]
        }
    }
    victim = tmp_path / "victim"
    victim.mkdir()
    runtime = _runtime(tmp_path, claude=table)
    try:
        steps = [
            ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": f"rm -rf {victim}"})]),
            ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "echo allowed"})]),
            ModelStep(text="ok"),
        ]
        agent = _drive(runtime, tmp_path, steps)
    finally:
        runtime.close()
    assert victim.exists()
    results = [e for e in agent.session.history if e.type == "tool/result"]
    assert (
        results[0].data["is_error"]
        and results[0].data["output"] == "blocked by a PreToolUse hook: rm -rf is not allowed here"
    )
    assert results[1].data["output"].startswith("allowed")
    hook_results = [e for e in agent.session.history if e.type == "hook/result"]
    assert hook_results[0].data["reports"][0]["blocked"] is True


def test_codex_hook_denies_through_json(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    table = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "^Bash$", "hooks": [{"type": "command", "command": _command(record, "deny-json")}]}
            ]
        }
    }
    hooks_file = tmp_path / "hooks.json"
    hooks_file.write_text(json.dumps(table))
    runtime = _runtime(tmp_path, codex=str(hooks_file))
    try:
        agent = _drive(
            runtime,
            tmp_path,
            [ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "echo no"})]), ModelStep()],
        )
    finally:
        runtime.close()
    (result,) = [e for e in agent.session.history if e.type == "tool/result"]
    assert result.data["output"] == "blocked by a PreToolUse hook: codex policy says no"


@pytest.mark.parametrize(("action", "error"), [("crash", "exited with status 1"), ("sleep", "timed out after 0.5 s")])
def test_failing_hook_is_reported_and_the_agent_goes_on(tmp_path: Path, action: str, error: str) -> None:
    record = tmp_path / "rec"
    runtime = _runtime(tmp_path, claude=_table(record, action, timeout=0.5))
    try:
        agent = _drive(
            runtime,
            tmp_path,
            [ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "echo still"})]), ModelStep(text="end")],
        )
    finally:
        runtime.close()
    (result,) = [e for e in agent.session.history if e.type == "tool/result"]
    assert result.data["output"].startswith("still")
    reports = [r for e in agent.session.history if e.type == "hook/result" for r in e.data["reports"]]
    assert reports and all(error in r["error"] for r in reports)
    assert not any(r["blocked"] for r in reports)


def test_matcher_limits_tool_hooks(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    table = {
        "hooks": {
            "PreToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": _command(record, "ok")}]}]
        }
    }
    runtime = _runtime(tmp_path, claude=table)
    try:
        _drive(
            runtime,
            tmp_path,
            [ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "true"})]), ModelStep()],
        )
    finally:
        runtime.close()
    assert _recorded(record) == []


def test_exit_codes_per_dialect() -> None:
    assert interpret("claude", "PreToolUse", "h", 2, "", "").blocked
    codex_silent = interpret("codex", "PreToolUse", "h", 2, "", "")
    assert not codex_silent.blocked and "without a reason" in (codex_silent.error or "")
    assert interpret("codex", "PreToolUse", "h", 2, "", "nope").blocked
    other = interpret("claude", "PreToolUse", "h", 1, "", "bad")
    assert not other.blocked and other.error == "exited with status 1: bad"
    legacy = interpret("claude", "PreToolUse", "h", 0, '{"decision": "block", "reason": "r"}', "")
    assert legacy.blocked and legacy.reason == "r"
    stop = interpret("claude", "Stop", "h", 0, '{"continue": false, "stopReason": "enough"}', "")
    assert stop.stop and stop.stop_reason == "enough"
    start = interpret("claude", "SessionStart", "h", 2, "", "not a blocker")
    assert not start.blocked and "cannot block" in (start.error or "")


def test_user_prompt_block_ends_the_turn(tmp_path: Path) -> None:
    script = tmp_path / "block.sh"
    script.write_text("#!/bin/sh\ncat >/dev/null\necho 'no prompts today' >&2\nexit 2\n")
    script.chmod(0o755)
    runtime = _runtime(
        tmp_path, claude={"UserPromptSubmit": [{"hooks": [{"type": "command", "command": str(script)}]}]}
    )
    try:
        agent = _drive(runtime, tmp_path)
    finally:
        runtime.close()
    assert not [e for e in agent.session.history if e.type == "tool/call"]
    (end,) = [e for e in agent.session.history if e.type == "turn/end"]
    assert end.data["blocked"] == "no prompts today"


def test_build_payload_maps_tool_names_and_nulls() -> None:
    facts = HookFacts(
        "PreToolUse", "s", "/w", None, "m", "default", "t", {"tool_name": "bash", "tool_input": {}, "tool_use_id": "u"}
    )
    assert build_payload("codex", facts)["transcript_path"] is None
    assert build_payload("claude", facts)["transcript_path"] == ""
    assert build_payload("claude", facts)["tool_name"] == "Bash"
    assert "model" not in build_payload("claude", facts) and build_payload("codex", facts)["model"] == "m"


def test_bad_hook_file_fails_the_plugin_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "settings.json"
    bad.write_text("{not json")
    from dsh.loader import BootError

    with pytest.raises(BootError, match=rf"claude hooks file {bad}: invalid JSON at line 1"):
        _runtime(tmp_path, claude=str(bad))
    assert HOOKS.name == "hooks"


def test_blocking_stop_hook_continues_the_agent_each_time(tmp_path: Path) -> None:
    # A Stop hook as the peers' docs write one: it keeps the agent going until its own condition
    # holds (here: it has been asked three times), reading stop_hook_active from stdin.
    count = tmp_path / "count"
    script = tmp_path / "stop.py"
    script.write_text(
        "import json, pathlib, sys\n"
        "payload = json.load(sys.stdin)\n"
        f"count = pathlib.Path({str(count)!r})\n"
        "seen = count.read_text().split() if count.exists() else []\n"
        "count.write_text(' '.join([*seen, str(payload['stop_hook_active'])]))\n"
        "if len(seen) < 2:\n"
        "    print(json.dumps({'decision': 'block', 'reason': f'run the tests first ({len(seen)})'}))\n"
    )
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    runtime = _runtime(tmp_path, claude={"Stop": [{"hooks": [{"type": "command", "command": command}]}]})
    try:
        steps = [ModelStep(text="finished?"), ModelStep(text="still?"), ModelStep(text="tests pass")]
        agent = _drive(runtime, tmp_path, steps)
    finally:
        runtime.close()
    users = [e.data for e in agent.session.history if e.type == "message/user"]
    assert users[1:] == [
        {"text": "run the tests first (0)", "source": "stop_hook"},
        {"text": "run the tests first (1)", "source": "stop_hook"},
    ]
    assert count.read_text().split() == ["False", "True", "True"]
    assert [e.data["text"] for e in agent.session.history if e.type == "message/assistant"] == [
        "finished?",
        "still?",
        "tests pass",
    ]


def test_hooks_keep_the_users_credentials_but_never_dsh_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "t0k3n")
    monkeypatch.setenv("DSH_SESSION_ID", "outer-session")
    out = tmp_path / "env.txt"
    table = {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": f"env > {out}"}]}]}}
    runtime = _runtime(tmp_path, claude=table)
    try:
        _drive(
            runtime,
            tmp_path,
            [ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "true"})]), ModelStep()],
        )
    finally:
        runtime.close()
    lines = out.read_text().splitlines()
    assert "MY_API_TOKEN=t0k3n" in lines
    assert not [line for line in lines if line.upper().startswith("DSH_")]
    assert f"CLAUDE_PROJECT_DIR={tmp_path}" in lines
