"""The Gemini CLI dialect, stage by stage: its file format, matchers, payloads, environment and verdicts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from dsh.bash import harness_identity_keys
from dsh.hooks.dialect import HookCommand, HookFacts, build_payload, load_hook_table, loaded, select_hooks
from dsh.hooks_gemini import DIALECT, IDENTITY_VARIABLES, SHELL_TOOL
from dsh.session import SessionHeader


@pytest.fixture(autouse=True)
def gemini() -> Iterator[None]:
    """The dialect loaded, as the hooks plugin loads it from its entry point."""
    with loaded(DIALECT):
        yield


def _table(hooks: dict[str, Any]) -> Any:
    return load_hook_table("gemini", {"hooks": hooks})


def test_a_settings_file_reads_as_gemini_cli_writes_it() -> None:
    table = _table(
        {
            "BeforeTool": [
                {
                    "matcher": "write_file|replace",
                    "sequential": True,
                    "hooks": [
                        {
                            "name": "security-check",
                            "type": "command",
                            "command": "$GEMINI_PROJECT_DIR/.gemini/hooks/security.sh",
                            "timeout": 5000,
                            "description": "refuses secrets",
                        }
                    ],
                }
            ],
            "AfterAgent": [{"hooks": [{"type": "command", "command": "true"}]}],
            "PreToolUse": [{"hooks": [{"type": "command", "command": "true"}]}],
        }
    )
    (group,) = table.groups("BeforeTool")
    (hook,) = group.hooks
    assert hook.timeout == 5.0  # milliseconds in the file
    (after,) = table.groups("AfterAgent")[0].hooks
    assert after.timeout == 60.0  # Gemini CLI's default
    # A Claude Code event name is no Gemini event: a warning naming it, never a silent hook.
    assert table.warnings == (
        "gemini hooks (inline): event 'PreToolUse' is not a Gemini CLI hook event; its hooks never run",
    )


def test_tool_matchers_are_regular_expressions_and_lifecycle_matchers_exact() -> None:
    hook = {"type": "command", "command": "true"}
    table = _table(
        {
            "BeforeTool": [
                {"matcher": "run_shell.*", "hooks": [hook]},
                {"matcher": "read_file", "hooks": [{**hook, "command": "read"}]},
                {"matcher": "run_(shell", "hooks": [{**hook, "command": "literal"}]},
            ],
            "SessionStart": [
                {"matcher": "start", "hooks": [{**hook, "command": "partial"}]},
                {"matcher": "startup", "hooks": [{**hook, "command": "exact"}]},
            ],
        }
    )
    chosen = [h.command for h in select_hooks(table, "BeforeTool", SHELL_TOOL)]
    assert chosen == ["true"]
    # An invalid expression is the literal tool name to Gemini CLI, not an error.
    assert [h.command for h in select_hooks(table, "BeforeTool", "run_(shell")] == ["literal"]
    assert table.warnings == ()
    assert [h.command for h in select_hooks(table, "SessionStart", "startup")] == ["exact"]


def test_a_before_tool_payload_carries_exactly_gemini_cli_fields() -> None:
    facts = HookFacts(
        event="BeforeTool",
        session_id="s-1",
        cwd="/work",
        transcript_path=None,
        model="m",
        permission_mode="default",
        turn_id="t-1",
        fields={"tool_name": "bash", "tool_input": {"command": "ls"}, "tool_use_id": "c-1"},
    )
    payload = build_payload("gemini", facts)
    assert set(payload) == {"session_id", "transcript_path", "cwd", "hook_event_name", "timestamp"} | {
        "tool_name",
        "tool_input",
    }
    assert payload["tool_name"] == "run_shell_command" and payload["tool_input"] == {"command": "ls"}
    assert payload["transcript_path"] == "" and payload["hook_event_name"] == "BeforeTool"
    assert datetime.fromisoformat(payload["timestamp"].replace("Z", "+00:00")).tzinfo is not None
    after = build_payload(
        "gemini",
        facts._replace(
            event="AfterTool", fields={**facts.fields, "tool_response": {"output": "a\n", "is_error": False}}
        ),
    )
    assert after["tool_response"]["llmContent"] == "a\n" and after["tool_response"]["returnDisplay"] == "a\n"
    assert "error" not in after["tool_response"]


def test_after_agent_carries_the_prompt_and_the_answer() -> None:
    facts = HookFacts(
        event="AfterAgent",
        session_id="s",
        cwd="/",
        transcript_path="/t.jsonl",
        model="m",
        permission_mode="default",
        fields={"stop_hook_active": False, "last_assistant_message": "done", "prompt": "do it"},
    )
    payload = build_payload("gemini", facts)
    assert payload["prompt"] == "do it" and payload["prompt_response"] == "done"
    assert payload["stop_hook_active"] is False and "last_assistant_message" not in payload


def test_model_payloads_use_the_stable_model_api() -> None:
    facts = HookFacts(
        event="AfterModel",
        session_id="s",
        cwd="/",
        transcript_path=None,
        model="m",
        permission_mode="default",
        fields={
            "model_name": "scripted",
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            "response_text": "bye",
            "response_tool_calls": [],
        },
    )
    payload = build_payload("gemini", facts)
    assert payload["llm_request"]["model"] == "scripted"
    assert payload["llm_request"]["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "model", "content": "hello"},
    ]
    (candidate,) = payload["llm_response"]["candidates"]
    assert candidate["content"] == {"role": "model", "parts": ["bye"]}


def test_hooks_get_gemini_cli_variables_and_children_never_inherit_them() -> None:
    env = DIALECT.hook_env(HookCommand("true"), SessionHeader(id="s-9", cwd="/proj"))
    assert env == {
        "GEMINI_PROJECT_DIR": "/proj",
        "GEMINI_CWD": "/proj",
        "GEMINI_SESSION_ID": "s-9",
        "CLAUDE_PROJECT_DIR": "/proj",
    }
    assert set(env) <= IDENTITY_VARIABLES <= harness_identity_keys()


def _verdict(event: str, code: int, stdout: str = "", stderr: str = "", **kw: Any) -> Any:
    return DIALECT.interpret(event, "hook.sh", code, stdout, stderr, **kw)


def test_exit_2_blocks_with_stderr_as_the_reason_and_other_statuses_warn() -> None:
    blocked = _verdict("BeforeTool", 2, stderr="no rm here\n")
    assert blocked.blocked and blocked.reason == "no rm here"
    warned = _verdict("BeforeTool", 1, stderr="oops")
    assert not warned.blocked and warned.error == "exited with status 1: oops"
    advisory = _verdict("SessionEnd", 2, stderr="late")
    assert not advisory.blocked and advisory.error is not None


def test_json_output_decides_as_the_reference_says() -> None:
    deny = _verdict("BeforeTool", 0, json.dumps({"decision": "deny", "reason": "Security Policy"}))
    assert deny.blocked and deny.reason == "Security Policy"
    assert _verdict("BeforeTool", 0, json.dumps({"decision": "block", "reason": "r"})).blocked
    allow = _verdict("BeforeTool", 0, json.dumps({"decision": "allow", "systemMessage": "ok"}))
    assert not allow.blocked and allow.system_message == "ok"
    stop = _verdict("AfterTool", 0, json.dumps({"continue": False, "stopReason": "enough"}))
    assert stop.stop and stop.stop_reason == "enough"
    context = _verdict("BeforeAgent", 0, json.dumps({"hookSpecificOutput": {"additionalContext": "branch main"}}))
    assert context.additional_context == "branch main"
    # Advisory events ignore flow control.
    assert not _verdict("SessionStart", 0, json.dumps({"decision": "deny", "continue": False})).blocked
    # Plain stdout is a message for the user, never a decision.
    plain = _verdict("BeforeTool", 0, "hello\n")
    assert not plain.blocked and plain.system_message == "hello"


def test_a_before_tool_rewrite_merges_with_the_models_arguments() -> None:
    output = json.dumps({"hookSpecificOutput": {"tool_input": {"command": "ls -la"}}})
    verdict = _verdict("BeforeTool", 0, output, tool="bash", tool_input={"command": "ls", "timeout": 5})
    assert verdict.updated_input == {"command": "ls -la", "timeout": 5}


def test_the_entry_point_names_the_dialect() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["dsh.hook_dialects"] == {"gemini": "dsh.hooks_gemini:DIALECT"}
