"""Which hooks an event runs: matcher, ``if`` rule, ``once`` and duplicates, per dialect."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dsh.hooks import _claude, _codex
from dsh.hooks._load import load_hook_table
from dsh.hooks._select import select_hooks
from dsh.hooks._table import Dialect
from dsh.hooks.dialect import loaded


@pytest.fixture(autouse=True)
def builtin_dialects() -> Iterator[None]:
    """Claude Code and Codex loaded, as the hooks plugin loads them from their entry points."""
    with loaded(_claude.DIALECT, _codex.DIALECT):
        yield


def _table(dialect: Dialect, event: str, *groups: tuple[str | None, list[dict[str, Any]]]) -> Any:
    raw = [{"hooks": hooks} if matcher is None else {"matcher": matcher, "hooks": hooks} for matcher, hooks in groups]
    table = load_hook_table(dialect, {"hooks": {event: raw}})
    assert table.warnings == ()
    return table


def _commands(hooks: list[Any]) -> list[str]:
    return [h.command for h in hooks]


def test_claude_runs_identical_command_hooks_once_and_codex_runs_each() -> None:
    same = {"type": "command", "command": "audit"}
    for dialect, expected in (("claude", ["audit"]), ("codex", ["audit", "audit"])):
        table = _table(dialect, "PreToolUse", ("Bash", [same]), (".*", [same]))
        assert _commands(select_hooks(table, "PreToolUse", ["Bash"], tool="bash")) == expected


def test_a_claude_exec_form_with_other_args_is_not_a_duplicate() -> None:
    one = {"type": "command", "command": "audit", "args": ["a"]}
    two = {"type": "command", "command": "audit", "args": ["b"]}
    table = _table("claude", "Stop", (None, [one, two, one]))
    assert [h.args for h in select_hooks(table, "Stop", None)] == [("a",), ("b",)]


def test_an_if_rule_filters_tool_events_only() -> None:
    git_only = {"type": "command", "command": "on-git", "if": "Bash(git *)"}
    table = _table("claude", "PreToolUse", (None, [git_only]))
    assert _commands(select_hooks(table, "PreToolUse", ["Bash"], tool="bash", tool_input={"command": "git push"}))
    assert not select_hooks(table, "PreToolUse", ["Bash"], tool="bash", tool_input={"command": "ls && gitk"})
    stop = _table("claude", "Stop", (None, [git_only]))
    assert _commands(select_hooks(stop, "Stop", None)) == ["on-git"], "ignored outside tool events"


def test_a_once_hook_is_skipped_when_done_and_others_are_not() -> None:
    table = _table(
        "claude",
        "UserPromptSubmit",
        (None, [{"type": "command", "command": "first", "once": True}, {"type": "command", "command": "every"}]),
    )
    assert _commands(select_hooks(table, "UserPromptSubmit", None, done=lambda hook: True)) == ["every"]
    assert _commands(select_hooks(table, "UserPromptSubmit", None)) == ["first", "every"]


def test_matchers_per_dialect() -> None:
    hook = [{"type": "command", "command": "h"}]
    claude = _table("claude", "PreToolUse", ("Bash", hook))
    codex = _table("codex", "PreToolUse", ("Bash", hook))
    assert not select_hooks(claude, "PreToolUse", ["BashOutput"], tool="bash_output")
    assert select_hooks(codex, "PreToolUse", ["BashOutput"], tool="bash_output")
    assert select_hooks(claude, "PreToolUse", ["Agent", "Task"], tool="spawn_agent") == []
    task = _table("claude", "PreToolUse", ("Task", hook))
    assert _commands(select_hooks(task, "PreToolUse", ["Agent", "Task"], tool="spawn_agent")) == ["h"]


def test_a_disabled_table_selects_nothing() -> None:
    table = load_hook_table(
        "claude", {"disableAllHooks": True, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "h"}]}]}}
    )
    assert select_hooks(table, "Stop", None) == []
