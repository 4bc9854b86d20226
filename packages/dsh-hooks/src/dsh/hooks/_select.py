"""Which hooks of a table an event runs: matcher, Claude Code ``if`` rule, ``once``, duplicates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._payload import peer_tool_input, tool_subjects
from ._rules import parse_rule, rule_matches
from ._table import HookCommand, HookTable

TOOL_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"})
"""Events where a Claude Code ``if`` rule is checked (it is ignored on the others)."""


def select_hooks(
    table: HookTable,
    event: str,
    subjects: Sequence[str] | str | None,
    *,
    tool: str | None = None,
    tool_input: Mapping[str, Any] | None = None,
    done: Callable[[HookCommand], bool] = lambda hook: False,
) -> list[HookCommand]:
    """The commands of ``table`` that ``event`` runs for ``subjects``, in configuration order.

    A hook with an ``if`` rule runs only when the tool call matches it; a ``once`` hook for which
    ``done`` is true is skipped; Claude Code runs identical command hooks of one event once
    (Codex runs each).
    """
    seen: set[tuple[Any, ...]] = set()
    chosen: list[HookCommand] = []
    for group in table.groups(event):
        if not group.matches(subjects):
            continue
        for hook in group.hooks:
            if hook.condition is not None and event in TOOL_EVENTS and tool is not None:
                rule = parse_rule(hook.condition)
                peer_input = peer_tool_input("claude", tool, tool_input or {})
                if rule is None or not rule_matches(rule, tool_subjects("claude", tool), peer_input):
                    continue
            if hook.once and done(hook):
                continue
            if table.dialect == "claude":
                if hook.identity in seen:
                    continue
                seen.add(hook.identity)
            chosen.append(hook)
    return chosen
