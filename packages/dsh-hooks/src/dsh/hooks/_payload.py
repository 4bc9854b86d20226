"""Hook payloads in each dialect, built from the same identity facts.

The facts are dsh's (tool names and inputs as called, a transcript path or None); each dialect
(:mod:`._dialect`) says how its peer names the tools, shapes their inputs and results, writes a
missing value or path, and which keys each event may carry.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

from dsh.session import EMPTY_MAPPING

from ._dialect import Dialect, dialect_of


def peer_tool_name(dialect: Dialect, tool: str) -> str:
    """``tool`` as ``dialect`` names it."""
    return dialect_of(dialect).tool_names.get(tool, tool)


def tool_subjects(dialect: Dialect, tool: str) -> tuple[str, ...]:
    """Every name a matcher of ``dialect`` may use for ``tool`` (its peer name first)."""
    name = peer_tool_name(dialect, tool)
    return (name, *dialect_of(dialect).tool_aliases.get(name, ()))


def peer_tool_input(dialect: Dialect, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as the peer's tool would have taken them."""
    return dialect_of(dialect).tool_input(tool, arguments)


def peer_tool_response(dialect: Dialect, tool: str, response: Mapping[str, Any]) -> dict[str, Any]:
    """A call's result as the peer's tool reports it, dsh's own keys kept beside."""
    return dialect_of(dialect).tool_response(tool, response)


def dsh_tool_input(dialect: Dialect, tool: str, peer_input: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`peer_tool_input`: a hook's ``updatedInput`` in dsh's terms."""
    return dialect_of(dialect).dsh_input(tool, peer_input)


def _peer_call(dialect: Dialect, call: Any) -> Any:
    """One element of a batch's ``tool_calls`` (a PostToolUse-shaped record) in the peer's terms."""
    if not isinstance(call, Mapping) or not isinstance(call.get("tool_name"), str):
        return call
    tool = call["tool_name"]
    value = dict(call, tool_name=peer_tool_name(dialect, tool))
    for key, convert in (("tool_input", peer_tool_input), ("tool_response", peer_tool_response)):
        if isinstance(value.get(key), Mapping):
            value[key] = convert(dialect, tool, value[key])
    return value


class HookFacts(NamedTuple):
    """What the harness knows when an event fires, independent of dialect."""

    event: str
    session_id: str
    cwd: str
    transcript_path: str | None
    """From ``locate()``; None when persistence has no local artifact."""
    model: str
    permission_mode: str
    turn_id: str | None = None
    fields: Mapping[str, Any] = EMPTY_MAPPING
    """The event's own fields in dsh's terms (``tool_name`` ``bash``, ``tool_input`` as called)."""


def build_payload(dialect: Dialect, facts: HookFacts) -> dict[str, Any]:
    """The stdin JSON object for one hook of ``dialect``; keys the dialect does not send are left out."""
    peer = dialect_of(dialect)
    payload: dict[str, Any] = {
        "session_id": facts.session_id,
        "transcript_path": peer.path_value(facts.transcript_path),
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
            value = peer.tool_input(tool, value)
        elif key == "tool_response" and isinstance(tool, str) and isinstance(value, Mapping):
            value = peer.tool_response(tool, value)
        elif key == "tool_calls" and isinstance(value, list):
            value = [_peer_call(dialect, call) for call in value]
        elif key == "error" and facts.event == "StopFailure" and isinstance(value, str):
            value = peer.stop_error(value)
        elif key == "agent_transcript_path":
            value = peer.path_value(value)
        if value is None and (key in ("agent_id", "agent_type") or peer.omits_nulls):
            continue
        payload[key] = value
    payload.update(peer.extra_fields(facts.event, facts))
    allowed = peer.event_keys.get(facts.event)
    if allowed is not None:
        payload = {k: v for k, v in payload.items() if k in allowed}
    return payload
