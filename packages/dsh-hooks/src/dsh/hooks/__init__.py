"""Hooks for dsh: the runner the loop's hook seam (:data:`dsh.agent.HOOKS`) plugs into, and its
dialects (Claude Code and Codex here; others, Gemini CLI's, from their own distributions through
the ``dsh.hook_dialects`` entry points).

Existing hook scripts run unchanged: each learns its session from the JSON on its stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the event's fields).
The agent loop calls one :class:`HookRunner` method per lifecycle point and acts on the merged
:class:`HookOutcome`.

Exports resolve lazily: ``from dsh.hooks import HOOKS`` (what a host needs to look the service up)
loads only the key, the entry point's ``plugin`` only the plugin module, and the runner (asyncio,
the executor) loads when a deployment configures hooks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._key import HOOKS, hook_runner

if TYPE_CHECKING:
    from typing import Any

    from ._errors import HookConfigError
    from ._outcome import STOP_BLOCK_CAP, HookOutcome, HookReport, Notice
    from ._runner import HooksConfig, plugin
    from ._scope import HookScope
    from ._service import HookRunner

_EXPORTS = {
    "HookConfigError": "._errors",
    "HookOutcome": "._outcome",
    "HookReport": "._outcome",
    "Notice": "._outcome",
    "STOP_BLOCK_CAP": "._outcome",
    "HookScope": "._scope",
    "HookRunner": "._service",
    "HooksConfig": "._runner",
    "plugin": "._runner",
}

__all__ = [
    "HOOKS",
    "STOP_BLOCK_CAP",
    "HookConfigError",
    "HookOutcome",
    "HookReport",
    "HookRunner",
    "HookScope",
    "HooksConfig",
    "Notice",
    "hook_runner",
    "plugin",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsh.hooks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
