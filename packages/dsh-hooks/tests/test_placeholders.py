"""The peers' placeholders in a hook's command line (issue 23, item 1)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh.hooks import _claude, _codex
from dsh.hooks._process import command_line
from dsh.hooks._table import HookCommand
from dsh.hooks.dialect import loaded


@pytest.fixture(autouse=True)
def builtin_dialects() -> Iterator[None]:
    """Claude Code and Codex loaded, as the hooks plugin loads them from their entry points."""
    with loaded(_claude.DIALECT, _codex.DIALECT):
        yield


ENV = {"CLAUDE_PROJECT_DIR": "/p/my project", "CLAUDE_PLUGIN_ROOT": "/plug", "CLAUDE_PLUGIN_DATA": "/data"}


def test_the_exec_form_substitutes_in_command_and_args_and_quotes_each_word() -> None:
    hook = HookCommand("${CLAUDE_PROJECT_DIR}/guard.sh", args=("${CLAUDE_PLUGIN_ROOT}/x", "${tool_input.file_path}"))
    line = command_line(hook, ENV, {"file_path": "a b;rm -rf /"})
    assert line == "exec '/p/my project/guard.sh' /plug/x 'a b;rm -rf /'"


def test_tool_input_fields_are_read_by_path_as_strings_or_json() -> None:
    hook = HookCommand("cmd", args=("${tool_input.edits}", "${tool_input.missing}", "${tool_input.a.b}"))
    assert command_line(hook, {}, {"edits": [1], "a": {"b": "deep"}}) == "exec cmd '[1]' '' deep"


def test_a_bash_shell_form_line_is_left_to_bash_and_an_unset_placeholder_is_empty() -> None:
    assert command_line(HookCommand('"${CLAUDE_PROJECT_DIR}"/x.sh'), ENV) == '"${CLAUDE_PROJECT_DIR}"/x.sh'
    assert command_line(HookCommand("${CLAUDE_PLUGIN_DATA}/x", args=()), {}) == "exec /x"


def test_powershell_gets_the_text_substituted_since_it_does_not_read_the_braces_as_env() -> None:
    hook = HookCommand("& '${CLAUDE_PLUGIN_ROOT}/x.ps1'", shell="powershell")
    assert command_line(hook, ENV) == "& '/plug/x.ps1'"


def test_powershell_exec_form_doubles_every_quote_powershell_reads_as_single() -> None:
    """PowerShell ends a single-quoted string at U+2019 (and U+2018, U+201A, U+201B) as at ': a model's tool
    input holding one would run the rest of the argument as PowerShell on the host, unless doubled like '."""
    hook = HookCommand("./guard.ps1", args=("${tool_input.command}",), shell="powershell")
    attack = "a\u2019; Remove-Item ~ -Recurse; \u2018b'c\u201ad\u201be"
    line = command_line(hook, {}, {"command": attack})
    assert line == "& './guard.ps1' 'a\u2019\u2019; Remove-Item ~ -Recurse; \u2018\u2018b''c\u201a\u201ad\u201b\u201be'"
