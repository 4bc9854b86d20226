"""Hooks for dsh: the runner the loop's hook seam (:data:`dsh.agent.HOOKS`) plugs into, and its
dialects (Claude Code and Codex here; others, Gemini CLI's, from their own distributions through
the ``dsh.hook_dialects`` entry points).

Existing hook scripts run unchanged: each learns its session from the JSON on its stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the event's fields).
The agent loop calls one method of the plugin's :class:`Hooks` service per lifecycle point and acts
on the merged verdict. What runs a hook, :class:`dsh.hooks.runner.HookRunner` with its
``HookOutcome`` and ``HookReport``, is a module of its own: the service builds it once a table holds
a hook, so a command with no hooks file never imports it.
"""

from dsh.agent import STOP_BLOCK_CAP, Notice

from ._errors import HookConfigError
from ._hooks import Hooks
from ._key import HOOKS, hook_runner
from ._runner import HooksConfig, plugin
from ._scope import HookScope

__all__ = [
    "HOOKS",
    "STOP_BLOCK_CAP",
    "HookConfigError",
    "HookScope",
    "Hooks",
    "HooksConfig",
    "Notice",
    "hook_runner",
    "plugin",
]
