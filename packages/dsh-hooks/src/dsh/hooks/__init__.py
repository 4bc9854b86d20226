"""Hooks for dsh in the Claude Code and Codex dialects.

Existing hook scripts run unchanged: each learns its session from the JSON on its stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the event's fields).
"""

from ._config import Dialect, HookCommand, HookTable, MatcherGroup, load_hook_table
from ._payload import EVENTS, TOOL_NAMES, HookFacts, build_payload
from ._runner import HOOKS, HookOutcome, HookReport, HookRunner, HooksConfig, interpret, plugin, reports_as_data

__all__ = [
    "EVENTS",
    "HOOKS",
    "TOOL_NAMES",
    "Dialect",
    "HookCommand",
    "HookFacts",
    "HookOutcome",
    "HookReport",
    "HookRunner",
    "HookTable",
    "HooksConfig",
    "MatcherGroup",
    "build_payload",
    "interpret",
    "load_hook_table",
    "plugin",
    "reports_as_data",
]
