"""Hooks for dsh in the Claude Code and Codex dialects.

Existing hook scripts run unchanged: each learns its session from the JSON on its stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the event's fields).
The agent loop calls one :class:`HookRunner` method per lifecycle point and acts on the merged
:class:`HookOutcome`.
"""

from ._config import (
    DEFAULT_TIMEOUT,
    Dialect,
    HookCommand,
    HookTable,
    MatcherGroup,
    load_hook_table,
    matcher_matches,
)
from ._outcome import HookOutcome, HookReport, Notice, interpret, reports_as_data
from ._payload import EVENT_KEYS, EVENTS, TOOL_NAMES, HookFacts, build_payload, dsh_tool_input, peer_tool_input
from ._rules import Rule, parse_rule, rule_matches
from ._runner import HOOKS, HookRunner, HooksConfig, HookScope, plugin

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENTS",
    "EVENT_KEYS",
    "HOOKS",
    "TOOL_NAMES",
    "Dialect",
    "HookCommand",
    "HookFacts",
    "HookOutcome",
    "HookReport",
    "HookRunner",
    "HookScope",
    "HookTable",
    "HooksConfig",
    "MatcherGroup",
    "Notice",
    "Rule",
    "build_payload",
    "dsh_tool_input",
    "interpret",
    "load_hook_table",
    "matcher_matches",
    "parse_rule",
    "peer_tool_input",
    "plugin",
    "reports_as_data",
    "rule_matches",
]
