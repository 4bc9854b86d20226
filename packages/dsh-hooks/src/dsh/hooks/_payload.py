"""Hook payloads in each dialect, built from the same identity facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._config import Dialect

TOOL_NAMES: Mapping[str, str] = {
    "bash": "Bash",
    "pwsh": "PowerShell",
    "bash_output": "BashOutput",
    "bash_stop": "KillShell",
    "spawn_agent": "Task",
}
"""Our tool names as the peers call them; others pass through unchanged."""

_IDENTITY = ("session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode")
_AGENT = ("agent_id", "agent_type")

# The keys each event accepts, per dialect: Codex's published schemas forbid any other key; the
# Claude Code SDK types declare these (required and optional). Both are checked by the tests.
_CODEX_KEYS: Mapping[str, frozenset[str]] = {
    event: frozenset({*_IDENTITY, "model", *extra})
    for event, extra in {
        "SessionStart": ("source",),
        "UserPromptSubmit": (*_AGENT, "turn_id", "prompt"),
        "PreToolUse": (*_AGENT, "turn_id", "tool_name", "tool_input", "tool_use_id"),
        "PostToolUse": (*_AGENT, "turn_id", "tool_name", "tool_input", "tool_response", "tool_use_id"),
        "Stop": ("turn_id", "stop_hook_active", "last_assistant_message"),
        "SubagentStart": (*_AGENT, "turn_id"),
        "SubagentStop": (*_AGENT, "turn_id", "stop_hook_active", "agent_transcript_path", "last_assistant_message"),
    }.items()
}
_CLAUDE_KEYS: Mapping[str, frozenset[str]] = {
    event: frozenset({*_IDENTITY, *_AGENT, *extra})
    for event, extra in {
        "SessionStart": ("source", "model"),
        "UserPromptSubmit": ("prompt",),
        "PreToolUse": ("tool_name", "tool_input", "tool_use_id"),
        "PostToolUse": ("tool_name", "tool_input", "tool_response", "tool_use_id"),
        "Stop": ("stop_hook_active", "last_assistant_message"),
        "SubagentStart": (),
        "SubagentStop": ("stop_hook_active", "agent_transcript_path", "last_assistant_message"),
    }.items()
}

EVENTS = frozenset(_CODEX_KEYS)
"""The events dsh emits, in both dialects."""


@dataclass(frozen=True)
class HookFacts:
    """What the harness knows when an event fires, independent of dialect."""

    event: str
    session_id: str
    cwd: str
    transcript_path: str | None
    """From ``locate()``; None when persistence has no local artifact."""
    model: str
    permission_mode: str
    turn_id: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    """The event's own fields (``tool_name`` already in our naming, mapped per dialect)."""


def build_payload(dialect: Dialect, facts: HookFacts) -> dict[str, Any]:
    """The stdin JSON object for one hook of ``dialect``."""
    payload: dict[str, Any] = {
        "session_id": facts.session_id,
        "transcript_path": facts.transcript_path if dialect == "codex" else (facts.transcript_path or ""),
        "cwd": facts.cwd,
        "hook_event_name": facts.event,
        "permission_mode": facts.permission_mode,
    }
    if dialect == "codex":
        payload["model"] = facts.model
        if facts.turn_id is not None:
            payload["turn_id"] = facts.turn_id
    for key, value in facts.fields.items():
        if key == "tool_name" and isinstance(value, str):
            value = TOOL_NAMES.get(value, value)
        elif key == "agent_transcript_path" and dialect == "claude" and value is None:
            value = ""
        payload[key] = value
    allowed = (_CODEX_KEYS if dialect == "codex" else _CLAUDE_KEYS).get(facts.event)
    if allowed is not None:
        payload = {k: v for k, v in payload.items() if k in allowed}
    return payload
