"""Which hooks of a table an event runs: matcher, the dialect's own condition, ``once``, duplicates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._dialect import dialect_of
from ._table import HookCommand, HookTable


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

    A hook whose condition (an ``if`` rule) the tool call does not meet is skipped, as is a ``once``
    hook for which ``done`` is true; a dialect that runs identical command hooks of one event once
    gets each once (the others run every one).
    """
    dialect = dialect_of(table.dialect)
    seen: set[tuple[Any, ...]] = set()
    chosen: list[HookCommand] = []
    for group in table.groups(event):
        if not group.matches(subjects, event):
            continue
        for hook in group.hooks:
            if not dialect.condition_applies(hook, event, tool, tool_input):
                continue
            if hook.once and done(hook):
                continue
            if dialect.runs_duplicates_once:
                if hook.identity in seen:
                    continue
                seen.add(hook.identity)
            chosen.append(hook)
    return chosen
