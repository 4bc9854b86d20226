"""Matchers that misspell a tool name never fire: one warning names file, event and matcher (issue 21, item 17)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.hooks import _claude, _codex
from dsh.hooks._load import load_hook_table
from dsh.hooks._table import Dialect
from dsh.hooks.dialect import loaded


@pytest.fixture(autouse=True)
def builtin_dialects() -> Iterator[None]:
    """Claude Code and Codex loaded, as the hooks plugin loads them from their entry points."""
    with loaded(_claude.DIALECT, _codex.DIALECT):
        yield


def _warnings(tmp_path: Path, dialect: Dialect, matcher: str, event: str = "PreToolUse") -> tuple[str, ...]:
    folder = tmp_path / "hooks"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / "settings.json"
    path.write_text(
        json.dumps({"hooks": {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": "true"}]}]}})
    )
    path.chmod(0o600)
    return load_hook_table(dialect, str(path)).warnings


@pytest.mark.parametrize(
    ("dialect", "matcher", "guess"),
    [
        ("claude", "bash", "Bash"),
        ("claude", "BASH", "Bash"),
        ("codex", "BASH", "Bash"),
        ("claude", "Bash ", "Bash"),
        ("codex", "Bash ", "Bash"),
        ("claude", "Bash,Write", "Bash|Write"),
        ("claude", "bash|Write", "Bash|Write"),
    ],
)
def test_a_misspelled_tool_matcher_is_one_warning_with_a_did_you_mean(
    tmp_path: Path, dialect: Dialect, matcher: str, guess: str
) -> None:
    (warning,) = _warnings(tmp_path, dialect, matcher)
    path = tmp_path / "hooks" / "settings.json"
    assert str(path) in warning and "'PreToolUse'" in warning and repr(matcher) in warning
    assert warning.endswith(f"did you mean {guess!r}?")


@pytest.mark.parametrize(
    "matcher", ["Bash", "Write|Edit", "^Bash$", "Notebook.*", "mcp__github__.*", "acme_deploy", "*", ""]
)
@pytest.mark.parametrize("dialect", ["claude", "codex"])
def test_matchers_that_name_tools_or_resemble_none_load_quietly(tmp_path: Path, dialect: Dialect, matcher: str) -> None:
    assert _warnings(tmp_path, dialect, matcher) == ()


def test_a_matcher_of_an_event_without_tools_is_not_read_as_a_tool_name(tmp_path: Path) -> None:
    assert _warnings(tmp_path, "claude", "startup", event="SessionStart") == ()
