"""Hook bridges, driven through the real agent loop with real hook commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.hooks import _claude, _codex
from dsh.hooks._decision import interpret
from dsh.hooks._load import load_hook_table
from dsh.hooks._payload import HookFacts, build_payload, dsh_tool_input, peer_tool_input
from dsh.hooks._rules import parse_rule, rule_matches
from dsh.hooks._table import matcher_matches
from dsh.hooks.dialect import loaded


@pytest.fixture(autouse=True)
def builtin_dialects() -> Iterator[None]:
    """Claude Code and Codex loaded, as the hooks plugin loads them from their entry points."""
    with loaded(_claude.DIALECT, _codex.DIALECT):
        yield


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
    broken = '{"hookSpecificOutput": '
    assert interpret("claude", "UserPromptSubmit", "h", 0, broken, "").additional_context == broken.strip()
    assert "invalid JSON" in (interpret("codex", "UserPromptSubmit", "h", 0, broken, "").error or "")
    start = interpret("claude", "SessionStart", "h", 2, "", "not a blocker")
    assert not start.blocked and "cannot block" in (start.error or "")


def test_build_payload_maps_tool_names_and_nulls() -> None:
    facts = HookFacts(
        "PreToolUse", "s", "/w", None, "m", "default", "t", {"tool_name": "bash", "tool_input": {}, "tool_use_id": "u"}
    )
    assert build_payload("codex", facts)["transcript_path"] is None
    assert build_payload("claude", facts)["transcript_path"] == ""
    assert build_payload("claude", facts)["tool_name"] == "Bash"
    assert "model" not in build_payload("claude", facts) and build_payload("codex", facts)["model"] == "m"


def test_config_warnings_name_file_event_and_thing(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "model": "opus",
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Bash", "hooks": [{"type": "command", "command": "x", "shell": "fish"}]}
                    ],
                    "PreToolUze": [{"hooks": [{"type": "command", "command": "x"}]}],
                    "Stop": [{"matcher": "*", "hooks": [{"type": "webhook"}]}],
                    "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
                },
            }
        )
    )
    table = load_hook_table("claude", str(settings))
    assert all(str(settings) in w for w in table.warnings)
    assert any("'PreToolUse'" in w and "'shell'" in w for w in table.warnings)
    assert any("'PreToolUze' is not a Claude Code hook event" in w for w in table.warnings)
    assert any("'Stop'" in w and "unknown type 'webhook'" in w for w in table.warnings)
    assert len(table.warnings) == 3, "a documented event dsh never emits (Notification) loads quietly"
    assert table.groups("PreToolUse")[0].hooks == ()


def test_permission_rules_of_if() -> None:
    def check(rule: str, command: str) -> bool:
        parsed = parse_rule(rule)
        assert parsed is not None
        return rule_matches(parsed, ("Bash",), {"command": command})

    assert check("Bash(git *)", "git status") and check("Bash(git *)", "git")
    assert not check("Bash(git *)", "gitk") and not check("Bash(git *)", "echo git status")
    assert check("Bash(git *)", "echo hi && git push") and check("Bash(git *)", "A=1 B=2 git log")
    assert not check("Bash(git *)", "echo 'a && git push'")
    assert check("Bash(npm run test:*)", "npm run test --watch") and check("Bash", "anything")
    assert check("Bash(*rm -rf*)", "sudo rm -rf /") and not check("Edit(*.py)", "x")
    agent = parse_rule("Agent(Explore)")
    assert agent is not None and rule_matches(agent, ("Agent", "Task"), {"subagent_type": "Explore"})
    assert parse_rule("not a rule!") is None


def test_matcher_semantics_per_dialect() -> None:
    assert matcher_matches("claude", "Bash", "Bash") and not matcher_matches("claude", "Bash", "BashOutput")
    assert matcher_matches("claude", "^Bash", "BashOutput") and matcher_matches("claude", "Edit|Bash", "Bash")
    assert matcher_matches("codex", "Bash", "BashOutput") and not matcher_matches("codex", "[", "[")
    assert matcher_matches("claude", "Task", ("Agent", "Task")) and matcher_matches("codex", "", "x")
    assert matcher_matches("claude", "*", "anything") and matcher_matches("codex", None, "anything")


def test_tool_inputs_translate_to_each_peer_and_back() -> None:
    bash = {"command": "make", "timeout": 2.5, "workdir": "src"}
    assert peer_tool_input("claude", "bash", bash) == {"command": "make", "timeout": 2500, "workdir": "src"}
    assert dsh_tool_input("claude", "bash", {"command": "make", "timeout": 2500}) == {"command": "make", "timeout": 2.5}
    assert peer_tool_input("codex", "bash", bash) == bash
    spawn = {"agent_type": "Explore", "prompt": "look"}
    assert peer_tool_input("claude", "spawn_agent", spawn) == {"subagent_type": "Explore", "prompt": "look"}
    assert dsh_tool_input("claude", "spawn_agent", {"subagent_type": "Plan", "prompt": "p"}) == {
        "agent_type": "Plan",
        "prompt": "p",
    }
    rewrite = interpret(
        "claude",
        "PreToolUse",
        "h",
        0,
        '{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls", "timeout": 1000}}}',
        "",
        "bash",
    )
    assert rewrite.updated_input == {"command": "ls", "timeout": 1.0} and rewrite.decision == "allow"


def test_a_bad_hooks_file_is_a_plugin_error_carrying_the_file(tmp_path: Path) -> None:
    from dsh.core import PluginError
    from dsh.hooks import HookConfigError

    bad = tmp_path / "settings.json"
    bad.write_text("{not json")
    with pytest.raises(PluginError, match=rf"claude hooks file {bad}: invalid JSON at line 1") as err:
        load_hook_table("claude", str(bad))
    assert isinstance(err.value, HookConfigError) and err.value.path == str(bad)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "must be a JSON object"),
        ('{"hooks": ["PreToolUse"]}', "'hooks' must be an object of event names, not list"),
    ],
)
def test_a_malformed_hooks_file_error_names_the_file_as_data(tmp_path: Path, content: str, message: str) -> None:
    from dsh.hooks import HookConfigError

    bad = tmp_path / "hooks.json"
    bad.write_text(content)
    with pytest.raises(HookConfigError, match=message) as err:
        load_hook_table("codex", str(bad))
    assert (err.value.path, err.value.source) == (str(bad), f"codex hooks file {bad}")


def test_a_malformed_inline_table_error_has_no_file() -> None:
    from dsh.hooks import HookConfigError

    with pytest.raises(HookConfigError, match="'hooks' must be an object of event names, not str") as err:
        load_hook_table("claude", {"hooks": "PreToolUse"})
    assert (err.value.path, err.value.source) == (None, "claude hooks (inline)")
