"""Hooks for dsh in the Claude Code and Codex dialects.

Existing hook scripts run unchanged: each learns its session from the JSON on its stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the event's fields).
The agent loop calls one :class:`HookRunner` method per lifecycle point and acts on the merged
:class:`HookOutcome`.
"""

from ._config import HookCommand, HookTable, load_hook_table
from ._errors import HookConfigError
from ._outcome import HookOutcome, HookReport, Notice, reports_as_data
from ._runner import HOOKS, HookRunner, HooksConfig, HookScope, plugin

__all__ = [
    "HOOKS",
    "HookCommand",
    "HookConfigError",
    "HookOutcome",
    "HookReport",
    "HookRunner",
    "HookScope",
    "HookTable",
    "HooksConfig",
    "Notice",
    "load_hook_table",
    "plugin",
    "reports_as_data",
]
