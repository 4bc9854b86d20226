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

# Keys each Codex event accepts (its schemas forbid any other).
_CODEX_KEYS: Mapping[str, frozenset[str]] = {
    "SessionStart": frozenset(
        {"cwd", "hook_event_name", "model", "permission_mode", "session_id", "source", "transcript_path"}
    ),
    "UserPromptSubmit": frozenset(
        {
            "agent_id",
            "agent_type",
            "cwd",
            "hook_event_name",
            "model",
            "permission_mode",
            "prompt",
            "session_id",
            "transcript_path",
            "turn_id",
        }
    ),
    "PreToolUse": frozenset(
        {
            "agent_id",
            "agent_type",
            "cwd",
            "hook_event_name",
            "model",
            "permission_mode",
            "session_id",
            "tool_input",
            "tool_name",
            "tool_use_id",
            "transcript_path",
            "turn_id",
        }
    ),
    "PostToolUse": frozenset(
        {
            "agent_id",
            "agent_type",
            "cwd",
            "hook_event_name",
            "model",
            "permission_mode",
            "session_id",
            "tool_input",
            "tool_name",
            "tool_response",
            "tool_use_id",
            "transcript_path",
            "turn_id",
        }
    ),
    "Stop": frozenset(
        {
            "cwd",
            "hook_event_name",
            "last_assistant_message",
            "model",
            "permission_mode",
            "session_id",
            "stop_hook_active",
            "transcript_path",
            "turn_id",
        }
    ),
    "SubagentStart": frozenset(
        {
            "agent_id",
            "agent_type",
            "cwd",
            "hook_event_name",
            "model",
            "permission_mode",
            "session_id",
            "transcript_path",
            "turn_id",
        }
    ),
    "SubagentStop": frozenset(
        {
            "agent_id",
            "agent_transcript_path",
            "agent_type",
            "cwd",
            "hook_event_name",
            "last_assistant_message",
            "model",
            "permission_mode",
            "session_id",
            "stop_hook_active",
            "transcript_path",
            "turn_id",
        }
    ),
}

# Keys the Claude Code SDK types declare for each event (required and optional).
_CLAUDE_KEYS: Mapping[str, frozenset[str]] = {
    event: frozenset(
        {"session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode", "agent_id", "agent_type", *extra}
    )
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
