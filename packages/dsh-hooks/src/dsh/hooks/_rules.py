"""Claude Code permission rules as the ``if`` field of a hook uses them: ``Tool`` or ``Tool(pattern)``.

``Bash(git *)`` matches a Bash call any of whose subcommands (split at ``&&``, ``||``, ``;``, ``|``
and newlines, leading ``VAR=value`` assignments dropped) is ``git`` or starts with ``git ``; ``*`` is
a wildcard anywhere, a trailing ``:*`` is the older prefix form. ``Agent(Explore)`` matches the
subagent type; for other tools the pattern is a glob against ``tool_input.file_path``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_RULE = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*", re.DOTALL)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*\s+")


@dataclass(frozen=True)
class Rule:
    """A parsed permission rule."""

    tool: str
    pattern: str | None


def parse_rule(text: str) -> Rule | None:
    """The rule, or None when ``text`` is not a permission rule."""
    match = _RULE.fullmatch(text)
    if match is None:
        return None
    return Rule(match.group(1), match.group(2))


def _split_commands(command: str) -> list[str]:
    """Subcommands of a shell line, split outside quotes at control operators."""
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(command):
        ch = command[i]
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"' and i + 1 < len(command):
                current.append(command[i + 1])
                i += 1
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch == "\\" and i + 1 < len(command):
            current.extend(command[i : i + 2])
            i += 1
        elif ch in ";|&\n":
            parts.append("".join(current))
            current = []
            if i + 1 < len(command) and command[i + 1] == ch and ch in "|&":
                i += 1
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    cleaned = []
    for part in parts:
        part = part.strip()
        while True:
            assignment = _ASSIGNMENT.match(part)
            if assignment is None:
                break
            part = part[assignment.end() :]
        if part:
            cleaned.append(part)
    return cleaned


def _command_pattern(pattern: str) -> re.Pattern[str]:
    if pattern.endswith(":*"):
        prefix = re.escape(pattern[:-2])
        return re.compile(rf"{prefix}(\s.*)?", re.DOTALL)
    body = pattern
    optional_tail = body.endswith(" *")
    if optional_tail:
        body = body[:-2]
    regex = ".*".join(re.escape(piece) for piece in body.split("*"))
    if optional_tail:
        regex += r"(\s.*)?"
    return re.compile(regex, re.DOTALL)


def rule_matches(rule: Rule, tool_names: Sequence[str], tool_input: Mapping[str, Any]) -> bool:
    """Whether a call of a tool known by ``tool_names`` (peer names) with ``tool_input`` matches."""
    if rule.tool not in tool_names:
        return False
    if rule.pattern is None or rule.pattern in ("", "*"):
        return True
    command = tool_input.get("command")
    if isinstance(command, str) and rule.tool in ("Bash", "PowerShell"):
        regex = _command_pattern(rule.pattern.strip())
        return any(regex.fullmatch(part) for part in _split_commands(command))
    subagent = tool_input.get("subagent_type", tool_input.get("agent_type"))
    if isinstance(subagent, str) and rule.tool in ("Agent", "Task"):
        return fnmatch.fnmatchcase(subagent, rule.pattern)
    path = tool_input.get("file_path", tool_input.get("path"))
    if isinstance(path, str):
        return fnmatch.fnmatchcase(path, rule.pattern) or fnmatch.fnmatchcase(path, f"*/{rule.pattern}")
    return False
