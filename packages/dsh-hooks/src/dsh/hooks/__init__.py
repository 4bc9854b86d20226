"""Hooks for dsh in the Claude Code and Codex dialects.

Existing hook scripts run unchanged: each learns its session from the JSON on its stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the event's fields).
The agent loop calls one :class:`HookRunner` method per lifecycle point and acts on the merged
:class:`HookOutcome`. Importing this package is cheap: the runner (asyncio, the executor) loads
only when a deployment configures hooks, or when :class:`HookRunner` is first named.
"""

from typing import TYPE_CHECKING, Any

from ._errors import HookConfigError
from ._outcome import HookOutcome, HookReport, Notice
from ._runner import HOOKS, HooksConfig, plugin
from ._scope import HookScope

if TYPE_CHECKING:
    from ._service import HookRunner

__all__ = [
    "HOOKS",
    "HookConfigError",
    "HookOutcome",
    "HookReport",
    "HookRunner",
    "HookScope",
    "HooksConfig",
    "Notice",
    "plugin",
]


def __getattr__(name: str) -> Any:
    if name == "HookRunner":
        from ._service import HookRunner

        return HookRunner
    raise AttributeError(f"module 'dsh.hooks' has no attribute {name!r}")
