"""Hook bridges, driven through the real agent loop with real hook commands."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dsh.agent import Agent, ModelStep, ScriptedModel, ToolCall
from dsh.hooks import HOOKS, HookScope, hook_runner
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
    # The persistence seam's path (the view goes only to plugin hooks, and there are none).
    runtime = _runtime(tmp_path, backend, claude=_table(record), claude_transcript="plugins")
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


@pytest.mark.parametrize("view", ["plugins", "all"])
def test_payloads_are_built_without_creating_the_transcript(tmp_path: Path, view: str) -> None:
    record = tmp_path / "rec"
    runtime = _runtime(tmp_path, claude=_table(record), claude_transcript=view)
    try:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        agent = Agent(runtime.ctx, session, ScriptedModel([]))
        asyncio.run(agent.start("startup"))
        location = session.locate()
        assert location is not None
        assert not Path(location.path).exists()
        assert not (tmp_path / "home" / "sessions").exists()
        (entry,) = _recorded(record)
        # The seam's path, or (the default, every Claude Code hook) the Claude-Code-format view beside it.
        seam_or_view = location.path if view == "plugins" else str(tmp_path / "home" / "transcripts" / "claude-code")
        assert entry["payload"]["transcript_path"].startswith(seam_or_view)
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


def test_bad_hook_file_fails_the_plugin_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "settings.json"
    bad.write_text("{not json")
    from dsh.loader import BootError

    with pytest.raises(BootError, match=rf"claude hooks file {bad}: invalid JSON at line 1"):
        _runtime(tmp_path, claude=str(bad))
    assert HOOKS.name == "hooks"


def test_a_fifo_as_the_hook_file_fails_the_plugin_at_once(tmp_path: Path) -> None:
    import os
    import signal

    from dsh.loader import BootError

    fifo = tmp_path / "settings.json"
    os.mkfifo(fifo, 0o600)
    signal.alarm(20)  # a blocking open() would wait for a writer forever: SIGALRM ends the run instead
    try:
        refused = rf"claude hooks file {fifo}: cannot read: it is a FIFO, not a regular file"
        with pytest.raises(BootError, match=refused):
            _runtime(tmp_path, claude=str(fifo))
    finally:
        signal.alarm(0)


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


class _Capturing:
    """A model that answers from a script and keeps, for each request, the context it was given."""

    name = "capturing"

    def __init__(self, steps: list[ModelStep]) -> None:
        self.steps = list(steps)
        self.requests: list[list[str]] = []

    def begin_turn(self, prompt: str) -> None:
        pass

    async def step(self, session: Any, tools: Any) -> ModelStep:
        self.requests.append([e.data["text"] for e in session.history if e.type == "message/context"])
        return self.steps.pop(0) if self.steps else ModelStep()

    def subagent(self, agent_type: str) -> Any:
        return ScriptedModel([[ModelStep(text=f"{agent_type} done")]])


def _json_hook(output: dict[str, Any]) -> dict[str, Any]:
    return {"type": "command", "command": f"cat >/dev/null; echo {shlex.quote(json.dumps(output))}"}


def test_context_of_every_event_reaches_the_models_next_request(tmp_path: Path) -> None:
    def ctx(event: str, text: str) -> dict[str, Any]:
        return _json_hook({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})

    table = {
        "SessionStart": [{"hooks": [{"type": "command", "command": "echo plain start context"}]}],
        "UserPromptSubmit": [{"hooks": [ctx("UserPromptSubmit", "prompt context")]}],
        "PostToolUse": [{"matcher": "Bash", "hooks": [ctx("PostToolUse", "after bash")]}],
    }
    runtime = _runtime(tmp_path, claude={"hooks": table})
    model = _Capturing([ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "true"})]), ModelStep()])

    async def scenario() -> None:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        agent = Agent(runtime.ctx, session, model)
        await agent.start("startup")
        await agent.run_turn("go")

    try:
        asyncio.run(scenario())
    finally:
        runtime.close()
    assert model.requests == [
        ["plain start context", "prompt context"],
        ["plain start context", "prompt context", "after bash"],
    ]


def test_subagent_stop_block_continues_the_subagent_and_matchers_see_the_agent_type(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    count = tmp_path / "count"
    blocker = (
        f"cat >/dev/null; echo x >> {count}; "
        f'if [ $(wc -l < {count}) -lt 3 ]; then echo \'{{"decision": "block", "reason": "check again"}}\'; fi'
    )
    table = {
        "SubagentStop": [
            {"matcher": "^help", "hooks": [{"type": "command", "command": blocker}]},
            {"matcher": "reviewer", "hooks": [{"type": "command", "command": _command(record, "ok")}]},
        ],
        "SubagentStart": [
            {"matcher": "helper", "hooks": [_json_hook({"hookSpecificOutput": {"additionalContext": "be brief"}})]}
        ],
    }
    runtime = _runtime(tmp_path, claude={"hooks": table})
    subagents = {"helper": [ModelStep(text="first"), ModelStep(text="second"), ModelStep(text="third")]}

    async def scenario() -> Agent:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        steps = [
            ModelStep(tool_calls=[ToolCall(name="spawn_agent", arguments={"agent_type": "helper", "prompt": "p"})])
        ]
        agent = Agent(runtime.ctx, session, ScriptedModel([steps], subagents))
        await agent.run_turn("go")
        return agent

    try:
        agent = asyncio.run(scenario())
        (result,) = [e for e in agent.session.history if e.type == "tool/result"]
        child = runtime.ctx.require(SESSIONS).resume(result.data["data"]["session_id"])
    finally:
        runtime.close()
    assert count.read_text().count("x") == 3
    assert _recorded(record) == [], "the reviewer matcher does not match the helper type"
    assert result.data["output"] == "third"
    users = [e.data["text"] for e in child.history if e.type == "message/user"]
    assert users == ["p", "check again", "check again"]
    assert [e.data["text"] for e in child.history if e.type == "message/context"] == ["be brief"]
    assert not [e for e in agent.session.history if e.type == "message/context"], "SubagentStart context is the child's"


def test_pre_tool_use_continue_false_and_session_start_stop(tmp_path: Path) -> None:
    stop = _json_hook({"continue": False, "stopReason": "frozen"})
    runtime = _runtime(tmp_path, claude={"hooks": {"PreToolUse": [{"hooks": [stop]}]}})
    steps = [
        ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": f"touch {tmp_path / 'ran'}"})]),
        ModelStep(text="unreached"),
    ]
    try:
        agent = _drive(runtime, tmp_path, steps)
    finally:
        runtime.close()
    assert not (tmp_path / "ran").exists()
    assert [e.data["text"] for e in agent.session.history if e.type == "message/assistant"] == [""]
    (result,) = [e for e in agent.session.history if e.type == "tool/result"]
    assert result.data["output"] == "stopped by a PreToolUse hook: frozen"


@pytest.mark.skipif(shutil.which("pwsh") is None, reason="needs pwsh (PowerShell) on PATH")
def test_powershell_shell_runs_the_hook_in_pwsh(tmp_path: Path) -> None:
    out = tmp_path / "ps.txt"
    hook = {"type": "command", "shell": "powershell", "command": f"$input | Out-Null; 'from pwsh' > '{out}'"}
    runtime = _runtime(tmp_path, claude={"hooks": {"PreToolUse": [{"hooks": [hook]}]}})
    try:
        _drive(runtime, tmp_path, [ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "true"})])])
    finally:
        runtime.close()
    assert "from pwsh" in out.read_text(encoding="utf-8-sig", errors="replace").replace("\x00", "")


def test_a_finished_session_leaves_nothing_behind_in_the_runner(tmp_path: Path) -> None:
    export = {"type": "command", "command": "cat >/dev/null; echo 'export KEPT=1' >> \"$CLAUDE_ENV_FILE\""}
    once = {"type": "command", "command": "cat >/dev/null", "once": True}
    runtime = _runtime(tmp_path, claude={"hooks": {"SessionStart": [{"hooks": [export]}], "Stop": [{"hooks": [once]}]}})
    try:
        hooks = hook_runner(runtime.ctx)
        assert hooks is not None
        agent = _drive(runtime, tmp_path, [ModelStep(text="done")])
        assert hooks.session_env(agent.session.header) == {}
        assert hooks.runner is not None and not hooks.runner._done_once
        assert [p.name for p in (tmp_path / "home" / "run").glob("hook-env-*/*")] == []
    finally:
        runtime.close()


def test_a_settings_file_without_hooks_is_no_hooks_and_no_warning(tmp_path: Path) -> None:
    from dsh.hooks import _claude, _codex
    from dsh.hooks._load import load_hook_table
    from dsh.hooks.dialect import loaded

    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "opus", "permissions": {"allow": ["Bash(ls *)"]}}))
    with loaded(_claude.DIALECT, _codex.DIALECT):  # as the hooks plugin loads them
        table = load_hook_table("claude", str(settings))
        bare = load_hook_table("codex", {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}], "Stpo": []})
    assert table.events == {} and table.warnings == ()
    assert list(bare.events) == ["Stop"] and len(bare.warnings) == 1


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1, 0])
def test_a_timeout_that_is_not_a_positive_finite_number_is_a_warning(timeout: float) -> None:
    from dsh.hooks import _claude
    from dsh.hooks._load import load_hook_table
    from dsh.hooks.dialect import loaded

    with loaded(_claude.DIALECT):
        table = load_hook_table(
            "claude", {"PreToolUse": [{"hooks": [{"type": "command", "command": "exit 2", "timeout": timeout}]}]}
        )
    (warning,) = table.warnings
    assert f"'timeout' must be a positive number of seconds, not {timeout!r}" in warning


def test_stop_blocks_are_capped_at_eight_in_a_row_as_claude_code_caps_them(tmp_path: Path) -> None:
    # A stop rule that never lets go (the published failure mode: it blocked 63 times until max_steps).
    count = tmp_path / "count"
    never = f"cat >/dev/null; echo x >> {shlex.quote(str(count))}; echo 'not done yet' >&2; exit 2"
    runtime = _runtime(tmp_path, claude={"Stop": [{"hooks": [{"type": "command", "command": never}]}]})
    try:
        agent = _drive(runtime, tmp_path, [ModelStep(text=f"attempt {i}") for i in range(20)])
    finally:
        runtime.close()
    assert len(count.read_text().split()) == 9  # eight blocks honoured, the ninth overridden
    assistant = [e.data["text"] for e in agent.session.history if e.type == "message/assistant"]
    assert assistant == [f"attempt {i}" for i in range(9)]
    results = [e.data for e in agent.session.history if e.type == "hook/result" and e.data["event"] == "Stop"]
    (cap,) = [w for r in results for w in r.get("warnings", [])]
    assert "8 times in a row" in cap and "not done yet" in cap


@pytest.mark.system_parts("jq")  # the PostToolUse hook formats with jq
def test_a_hooks_stderr_is_recorded_and_bash_results_carry_claude_codes_keys(tmp_path: Path) -> None:
    seen = tmp_path / "response.json"
    post = f"jq -c .tool_response > {shlex.quote(str(seen))}; echo 'formatted 3 files' >&2"
    runtime = _runtime(
        tmp_path, claude={"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": post}]}]}
    )
    try:
        steps = [
            ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "echo out; echo err >&2"})]),
            ModelStep(),
        ]
        agent = _drive(runtime, tmp_path, steps)
    finally:
        runtime.close()
    response = json.loads(seen.read_text())
    assert {k: response[k] for k in ("stdout", "stderr", "interrupted", "isImage")} == {
        "stdout": "out\n",
        "stderr": "err\n",
        "interrupted": False,
        "isImage": False,
    }
    assert response["exit_code"] == 0  # dsh's own keys stay beside
    (result,) = [e.data for e in agent.session.history if e.type == "hook/result" and e.data["event"] == "PostToolUse"]
    assert result["reports"][0]["stderr"] == "formatted 3 files\n"


def test_an_async_hook_in_a_long_run_is_reported_at_a_later_step(tmp_path: Path) -> None:
    done = tmp_path / "done"
    command = f'cat >/dev/null; echo \'{{"systemMessage": "formatted"}}\'; touch {done}'
    hook = {"type": "command", "command": command, "async": True}
    runtime = _runtime(tmp_path, claude={"PostToolUse": [{"matcher": "Bash", "hooks": [hook]}]})
    wait = f"for i in $(seq 300); do [ -e {done} ] && break; sleep 0.1; done; sleep 2"
    try:
        steps = [ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": c})]) for c in ("true", wait)]
        agent = _drive(runtime, tmp_path, [*steps, ModelStep(text="done")])
    finally:
        runtime.close()
    reports = [r for e in agent.session.history if e.type == "hook/result" for r in e.data["reports"]]
    assert reports and all(r["background"] and r["system_message"] == "formatted" for r in reports)
    folder = tmp_path / "home" / "run" / "async-hooks"
    left = list(folder.iterdir()) if folder.exists() else []
    assert len(left) + len(reports) == 2  # a reported hook's files are removed; one still running keeps its own


class RateLimitError(Exception):
    """Named as the provider SDKs name theirs."""


class _Failing(_Capturing):
    """Answers its steps, then fails as a provider does."""

    async def step(self, session: Any, tools: Any) -> ModelStep:
        if not self.steps:
            raise RateLimitError("429: slow down")
        return await super().step(session, tools)


def test_post_tool_batch_sees_the_whole_step_and_stop_failure_a_provider_error(tmp_path: Path) -> None:
    folder = tmp_path / "payloads"
    folder.mkdir()
    keep = {"type": "command", "command": f'cat > {folder}/"$(date +%s%N)-$$.json"'}
    batch_context = _json_hook(
        {"hookSpecificOutput": {"hookEventName": "PostToolBatch", "additionalContext": "both ran"}}
    )
    table = {
        "PostToolBatch": [{"hooks": [keep, batch_context]}],
        "StopFailure": [{"matcher": "rate_limit", "hooks": [keep]}],
    }
    runtime = _runtime(tmp_path, claude=table)
    calls = [
        ToolCall(name="bash", arguments={"command": "echo one"}),
        ToolCall(name="bash", arguments={"command": "echo two"}),
    ]
    model = _Failing([ModelStep(text="two at once", tool_calls=calls)])
    try:

        async def scenario() -> Agent:
            agent = Agent(runtime.ctx, runtime.ctx.require(SESSIONS).create(tmp_path), model)
            await agent.start("startup")
            with pytest.raises(RateLimitError):
                await agent.run_turn("go")
            await agent.end()
            return agent

        agent = asyncio.run(scenario())
    finally:
        runtime.close()
    payloads = {p["hook_event_name"]: p for p in (json.loads(f.read_text()) for f in folder.iterdir())}
    batch = payloads["PostToolBatch"]["tool_calls"]
    assert [c["tool_input"]["command"] for c in batch] == ["echo one", "echo two"]
    assert [c["tool_response"]["stdout"] for c in batch] == ["one\n", "two\n"] and batch[0]["tool_name"] == "Bash"
    failure = payloads["StopFailure"]
    assert failure["error"] == "rate_limit" and "429: slow down" in failure["error_details"]
    assert failure["last_assistant_message"] == "two at once"
    for event, payload in payloads.items():
        keys = CLAUDE_KEYS[f"{event}HookInput"]
        assert set(payload) <= {*keys["required"], *keys["optional"]}, event
    contexts = [e.data["text"] for e in agent.session.history if e.type == "message/context"]
    assert "both ran" in contexts


class OverloadedError(Exception):
    """Named as the provider SDKs name theirs."""


class _Overloaded(_Capturing):
    async def step(self, session: Any, tools: Any) -> ModelStep:
        if not self.steps:
            raise OverloadedError("529: overloaded")
        return await super().step(session, tools)


def test_stop_failure_fires_in_both_dialects_with_each_peers_category(tmp_path: Path) -> None:
    folder = tmp_path / "payloads"
    folder.mkdir()
    keep = {"type": "command", "command": f'cat > {folder}/"$(date +%s%N)-$$.json"'}
    runtime = _runtime(
        tmp_path,
        claude={"StopFailure": [{"matcher": "server_error", "hooks": [keep]}]},
        codex={"StopFailure": [{"matcher": "^overloaded$", "hooks": [keep]}]},
    )
    try:

        async def scenario() -> None:
            agent = Agent(runtime.ctx, runtime.ctx.require(SESSIONS).create(tmp_path), _Overloaded([]))
            with pytest.raises(OverloadedError):
                await agent.run_turn("go")

        asyncio.run(scenario())
    finally:
        runtime.close()
    payloads = {p["error"]: p for p in (json.loads(f.read_text()) for f in folder.iterdir())}
    assert set(payloads) == {"server_error", "overloaded"}  # each dialect's name, and each matcher saw it
    codex = payloads["overloaded"]
    jsonschema.validate(codex, json.loads((CODEX_SCHEMAS / "stop-failure.command.input.schema.json").read_text()))
    assert codex["last_assistant_message"] is None and "529: overloaded" in codex["error_details"]
    claude = payloads["server_error"]
    keys = CLAUDE_KEYS["StopFailureHookInput"]
    assert set(claude) <= {*keys["required"], *keys["optional"]} and "last_assistant_message" not in claude


def test_no_hook_builds_no_runner_and_a_table_added_later_builds_it_and_runs(tmp_path: Path) -> None:
    """The plugin's ``Hooks`` service builds the runner only once a table holds a hook (issue 41);
    a dialect's table added later (an install and a refresh) is then run, and removing it stops it."""
    from dsh.hooks._load import load_hook_table

    record = tmp_path / "rec"
    one_call = [ModelStep(tool_calls=[ToolCall(name="bash", arguments={"command": "true"})]), ModelStep(text="done")]
    runtime = _runtime(tmp_path, codex={"hooks": {}})
    try:
        hooks = hook_runner(runtime.ctx)
        assert hooks is not None and runtime.ctx.get(HOOKS) is hooks
        _drive(runtime, tmp_path, one_call)
        assert hooks.runner is None and not record.exists()
        remove = hooks.tables.add("claude", load_hook_table("claude", _table(record)))
        _drive(runtime, tmp_path, one_call)
        assert hooks.runner is not None and hooks.runner.tables is hooks.tables
        ran = {r["payload"]["hook_event_name"] for r in _recorded(record)}
        assert {"SessionStart", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"} <= ran
        assert "claude" in hooks.runner._views  # its hooks got the Claude Code transcript view
        remove()
        assert "claude" not in hooks.tables and "claude" not in hooks.runner._views
        assert not hooks.has_hooks(["PreToolUse"]) and hooks.tables.files() == []
        before = len(list(record.glob("*.json")))
        _drive(runtime, tmp_path, one_call)
        assert len(list(record.glob("*.json"))) == before
    finally:
        runtime.close()


def test_a_runner_built_on_its_own_keeps_its_own_tables(tmp_path: Path) -> None:
    """A ``HookRunner`` an embedder or test builds without the plugin's service makes its own tables;
    a table added to them runs, removing it stops it, and the service's tables stay untouched."""
    from dsh.hooks._load import load_hook_table
    from dsh.hooks.runner import HookRunner

    record = tmp_path / "rec"
    runtime = _runtime(tmp_path, codex={"hooks": {}})
    try:
        runner = HookRunner(runtime.ctx)
        assert not runner.has_hooks(["PreToolUse"])
        remove = runner.tables.add("claude", load_hook_table("claude", _table(record)))
        assert runner.has_hooks(["PreToolUse"]) and [d.name for d in runner.tables.dialects()] == ["claude"]
        hooks = hook_runner(runtime.ctx)
        assert hooks is not None and hooks.tables is not runner.tables and not hooks.has_hooks(["PreToolUse"])
        header = runtime.ctx.require(SESSIONS).create(tmp_path).header
        outcome = asyncio.run(runner.pre_tool(HookScope(header), "bash", {"command": "true"}, "c1"))
        assert [r.event for r in outcome.reports] == ["PreToolUse"] and len(_recorded(record)) == 1
        remove()
        assert not runner.has_hooks(["PreToolUse"])
        assert asyncio.run(runner.pre_tool(HookScope(header), "bash", {"command": "true"}, "c2")).reports == ()
        runner.close()
    finally:
        runtime.close()
