"""The Codex dialect: everything Codex's hooks do differently, in one place.

Its files are ``hooks.json``-style with command handlers of ``command``, ``timeout`` (or
``timeoutSec``, at least 1 s) and ``async``. Every matcher is an unanchored regular expression (the
project's contract, see the README), and every hook configured runs, duplicates included. Tools
keep dsh's names but for ``Bash`` and ``PowerShell``; payloads carry exactly the keys Codex's
published schemas allow (``model`` and ``turn_id`` included, a missing value as ``null``,
``transcript_path`` a string or ``null``). Hooks get ``CODEX_THREAD_ID``, and a SessionStart hook its
env file as ``CODEX_ENV_FILE`` and, as Codex sets it too, ``CLAUDE_ENV_FILE``. Exit 2 blocks only
with a reason on stderr, stdout that starts like JSON but is not fails the hook, and a
PermissionRequest answer with a field Codex reserves fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import _claude as claude
from ._dialect import HookDialect

if TYPE_CHECKING:
    from dsh.session import SessionHeader

    from ._table import HookCommand

TOOL_NAMES: Mapping[str, str] = {"bash": "Bash", "pwsh": "PowerShell"}

THREAD_ID = "CODEX_THREAD_ID"
ENV_FILE = "CODEX_ENV_FILE"
IDENTITY_VARIABLES = frozenset({THREAD_ID, ENV_FILE, claude.ENV_FILE, claude.PLUGIN_ROOT, claude.PLUGIN_DATA})
"""What Codex tells its children and hooks (it sets Claude Code's env-file and plugin names too)."""

_IDENTITY = ("session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode", "model")
_AGENT = ("agent_id", "agent_type")

# The keys each event's published input schema allows (it forbids any other).
EVENT_KEYS: Mapping[str, frozenset[str]] = {
    "SessionStart": frozenset({*_IDENTITY, "source"}),
    "SessionEnd": frozenset({"session_id", "transcript_path", "cwd", "hook_event_name", "reason"}),
    **{
        event: frozenset({*_IDENTITY, *extra})
        for event, extra in {
            "UserPromptSubmit": (*_AGENT, "turn_id", "prompt"),
            "PreToolUse": (*_AGENT, "turn_id", "tool_name", "tool_input", "tool_use_id"),
            "PostToolUse": (*_AGENT, "turn_id", "tool_name", "tool_input", "tool_response", "tool_use_id"),
            "PermissionRequest": (*_AGENT, "turn_id", "tool_name", "tool_input"),
            "StopFailure": ("turn_id", "error", "error_details", "last_assistant_message"),
            "Stop": ("turn_id", "stop_hook_active", "last_assistant_message"),
            "SubagentStart": (*_AGENT, "turn_id"),
            "SubagentStop": (*_AGENT, "turn_id", "stop_hook_active", "agent_transcript_path", "last_assistant_message"),
        }.items()
    },
}


class Codex(HookDialect):
    """Codex's hooks (see the module docstring)."""

    name = "codex"
    peer = "Codex"
    identity_variables = IDENTITY_VARIABLES
    events = frozenset(
        {
            *("PreToolUse", "PermissionRequest", "PostToolUse", "UserPromptSubmit", "Stop", "StopFailure"),
            *("SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "SessionStart", "SessionEnd"),
            "Interrupt",
        }
    )
    handler_types = frozenset({"command", "prompt", "agent"})
    command_fields = frozenset(
        {"type", "command", "commandWindows", "command_windows", "timeout", "timeoutSec", "async"}
        | {"statusMessage", "status_message"}
    )
    timeout_fields = ("timeout", "timeoutSec")
    min_timeout = 1.0

    tool_names = TOOL_NAMES
    known_tools = frozenset(
        {*TOOL_NAMES.values(), "apply_patch", "Write", "Edit", "spawn_agent", "bash_output", "bash_stop"}
    )
    env_file_names = (ENV_FILE, claude.ENV_FILE)

    event_keys = EVENT_KEYS

    blocks_without_reason = False
    invalid_json_fails = True
    reserved_answer_fails_closed = True

    def hook_env(self, hook: HookCommand, header: SessionHeader) -> dict[str, str]:
        # A plugin's folders wherever its hooks are (plugins load as Claude Code hooks today).
        return {THREAD_ID: header.id, **claude.plugin_env(hook)}


DIALECT = Codex()
"""The Codex dialect."""
