"""Hooks for dsh: the runner the loop's hook seam (:data:`dsh.agent.HOOKS`) plugs into, and its
dialects (Claude Code and Codex here; others, Gemini CLI's, from their own distributions through
the ``dsh.hook_dialects`` entry points).

Existing hook scripts run unchanged: each learns its session from the JSON on its stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the event's fields).
The agent loop calls one :class:`HookRunner` method per lifecycle point and acts on the merged
:class:`HookOutcome`.
"""

from ._errors import HookConfigError
from ._key import HOOKS, hook_runner
from ._outcome import STOP_BLOCK_CAP, HookOutcome, HookReport, Notice
from ._runner import HooksConfig, plugin
from ._scope import HookScope
from ._service import HookRunner

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
