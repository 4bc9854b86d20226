"""Hook payloads in each dialect, built from the same identity facts.

Tool names and tool inputs are translated to each peer's own: Claude Code knows the subagent tool
as ``Agent`` (formerly ``Task``) with a ``subagent_type``, and gives Bash ``timeout`` in
milliseconds; Codex sees dsh's names and inputs except ``bash`` -> ``Bash``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._table import Dialect

TOOL_NAMES: Mapping[Dialect, Mapping[str, str]] = {
    "claude": {
        "bash": "Bash",
        "pwsh": "PowerShell",
        "bash_output": "BashOutput",
        "bash_stop": "KillShell",
        "spawn_agent": "Agent",
    },
    "codex": {"bash": "Bash", "pwsh": "PowerShell"},
}
"""Our tool names as each peer calls them; others pass through unchanged."""

TOOL_ALIASES: Mapping[Dialect, Mapping[str, tuple[str, ...]]] = {"claude": {"Agent": ("Task",)}, "codex": {}}
"""Older names a matcher may still use (Claude Code's ``Task`` is now ``Agent``)."""

_SHELL_TOOLS = frozenset({"bash", "pwsh"})

PEER_TOOLS: Mapping[Dialect, frozenset[str]] = {
    "claude": frozenset(
        {
            *TOOL_NAMES["claude"].values(),
            *(alias for names in TOOL_ALIASES["claude"].values() for alias in names),
            *("Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS", "NotebookEdit", "NotebookRead"),
            *("WebFetch", "WebSearch", "TodoWrite", "ExitPlanMode", "EnterPlanMode", "Skill", "SlashCommand"),
            *("KillBash", "AskUserQuestion", "ToolSearch", "Monitor", "TaskOutput", "TaskStop", "LSP"),
        }
    ),
    "codex": frozenset(
        {*TOOL_NAMES["codex"].values(), "apply_patch", "Write", "Edit", "spawn_agent", "bash_output", "bash_stop"}
    ),
}
"""Tool names a matcher of each dialect may sensibly name: dsh's tools as that peer sees them, and the
peer's own documented tools (a matcher for a tool dsh lacks loads quietly; one close to none of these is
most likely a typo)."""

_IDENTITY = ("session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode")
_AGENT = ("agent_id", "agent_type")

# The keys each event accepts, per dialect: Codex's published schemas forbid any other key; the
# Claude Code SDK types declare these (required and optional). Both are checked by the tests.
_CODEX_KEYS: Mapping[str, frozenset[str]] = {
    "SessionStart": frozenset({*_IDENTITY, "model", "source"}),
    "SessionEnd": frozenset({"session_id", "transcript_path", "cwd", "hook_event_name", "reason"}),
    **{
        event: frozenset({*_IDENTITY, "model", *extra})
        for event, extra in {
            "UserPromptSubmit": (*_AGENT, "turn_id", "prompt"),
            "PreToolUse": (*_AGENT, "turn_id", "tool_name", "tool_input", "tool_use_id"),
            "PostToolUse": (*_AGENT, "turn_id", "tool_name", "tool_input", "tool_response", "tool_use_id"),
            "PermissionRequest": (*_AGENT, "turn_id", "tool_name", "tool_input"),
            "StopFailure": ("turn_id", "error", "error_details", "last_assistant_message"),
            "Stop": ("turn_id", "stop_hook_active", "last_assistant_message"),
            "SubagentStart": (*_AGENT, "turn_id"),
            "SubagentStop": (
                *_AGENT,
                "turn_id",
                "stop_hook_active",
                "agent_transcript_path",
                "last_assistant_message",
            ),
        }.items()
    },
}
_CLAUDE_KEYS: Mapping[str, frozenset[str]] = {
    event: frozenset({*_IDENTITY, *_AGENT, *extra})
    for event, extra in {
        "SessionStart": ("source", "model"),
        "SessionEnd": ("reason",),
        "UserPromptSubmit": ("prompt",),
        "PreToolUse": ("tool_name", "tool_input", "tool_use_id"),
        "PostToolUse": ("tool_name", "tool_input", "tool_response", "tool_use_id"),
        "PostToolUseFailure": ("tool_name", "tool_input", "tool_use_id", "error", "is_interrupt"),
        "PermissionRequest": ("tool_name", "tool_input"),
        "PostToolBatch": ("tool_calls",),
        "StopFailure": ("error", "error_details", "last_assistant_message"),
        "Stop": ("stop_hook_active", "last_assistant_message"),
        "SubagentStart": (),
        "SubagentStop": ("stop_hook_active", "agent_transcript_path", "last_assistant_message"),
    }.items()
}

EVENT_KEYS: Mapping[Dialect, Mapping[str, frozenset[str]]] = {"claude": _CLAUDE_KEYS, "codex": _CODEX_KEYS}
"""The events each dialect gets from dsh, with the payload keys each may carry."""

EVENTS = frozenset(_CLAUDE_KEYS) | frozenset(_CODEX_KEYS)
"""Every event dsh emits in some dialect."""


def peer_stop_error(dialect: Dialect, kind: str) -> str:
    """A ``StopFailure`` category as ``dialect`` names it: Claude Code has no ``overloaded`` (its
    ``server_error`` covers it); Codex has every category dsh tells."""
    return "server_error" if dialect == "claude" and kind == "overloaded" else kind


def peer_tool_name(dialect: Dialect, tool: str) -> str:
    """``tool`` as ``dialect`` names it."""
    return TOOL_NAMES[dialect].get(tool, tool)


def tool_subjects(dialect: Dialect, tool: str) -> tuple[str, ...]:
    """Every name a matcher of ``dialect`` may use for ``tool`` (its peer name first)."""
    name = peer_tool_name(dialect, tool)
    return (name, *TOOL_ALIASES[dialect].get(name, ()))


def peer_tool_input(dialect: Dialect, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as the peer's tool would have taken them."""
    value = dict(arguments)
    if dialect != "claude":
        return value
    if (
        tool in _SHELL_TOOLS
        and isinstance(value.get("timeout"), int | float)
        and not isinstance(value["timeout"], bool)
    ):
        value["timeout"] = round(value["timeout"] * 1000)
    if tool == "spawn_agent" and "agent_type" in value:
        value["subagent_type"] = value.pop("agent_type")
    return value


def peer_tool_response(dialect: Dialect, tool: str, response: Mapping[str, Any]) -> dict[str, Any]:
    """A call's result as the peer's tool reports it, dsh's own keys kept beside.

    Claude Code's Bash result carries ``stdout``, ``stderr``, ``interrupted`` (a timeout or a signal
    ended it) and ``isImage``; published PostToolUse hooks read those.
    """
    value = dict(response)
    if dialect == "claude" and tool in _SHELL_TOOLS:
        value.setdefault("stdout", "")
        value.setdefault("stderr", "")
        value["interrupted"] = bool(value.get("timed_out")) or bool(value.get("interrupted"))
        value["isImage"] = False
    return value


def dsh_tool_input(dialect: Dialect, tool: str, peer_input: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`peer_tool_input`: a hook's ``updatedInput`` in dsh's terms."""
    value = dict(peer_input)
    if dialect != "claude":
        return value
    if (
        tool in _SHELL_TOOLS
        and isinstance(value.get("timeout"), int | float)
        and not isinstance(value["timeout"], bool)
    ):
        value["timeout"] = value["timeout"] / 1000
    if tool == "spawn_agent" and "subagent_type" in value:
        value["agent_type"] = value.pop("subagent_type")
    return value


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
    """The event's own fields in dsh's terms (``tool_name`` ``bash``, ``tool_input`` as called)."""


def build_payload(dialect: Dialect, facts: HookFacts) -> dict[str, Any]:
    """The stdin JSON object for one hook of ``dialect``; keys the dialect does not send are left out."""
    payload: dict[str, Any] = {
        "session_id": facts.session_id,
        "transcript_path": facts.transcript_path if dialect == "codex" else (facts.transcript_path or ""),
        "cwd": facts.cwd,
        "hook_event_name": facts.event,
        "permission_mode": facts.permission_mode,
        "model": facts.model,
    }
    if facts.turn_id is not None:
        payload["turn_id"] = facts.turn_id
    tool = facts.fields.get("tool_name")
    for key, value in facts.fields.items():
        if key == "tool_name" and isinstance(value, str):
            value = peer_tool_name(dialect, value)
        elif key == "tool_input" and isinstance(tool, str) and isinstance(value, Mapping):
            value = peer_tool_input(dialect, tool, value)
        elif key == "tool_response" and isinstance(tool, str) and isinstance(value, Mapping):
            value = peer_tool_response(dialect, tool, value)
        elif key == "error" and facts.event == "StopFailure" and isinstance(value, str):
            value = peer_stop_error(dialect, value)
        elif key == "agent_transcript_path" and dialect == "claude" and value is None:
            value = ""
        if value is None and (key in ("agent_id", "agent_type") or dialect == "claude"):
            continue  # Claude Code leaves out an optional key rather than sending null
        payload[key] = value
    allowed = EVENT_KEYS[dialect].get(facts.event)
    if allowed is not None:
        payload = {k: v for k, v in payload.items() if k in allowed}
    return payload
