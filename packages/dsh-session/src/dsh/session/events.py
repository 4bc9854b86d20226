"""The events dsh's harness records in a transcript, one typed class per event type, and their checker.

Each class is a :class:`~typing.TypedDict` of one event type's ``data``: an integrator reading a
transcript writes ``data = cast(ToolResultData, event.data)`` and gets every field typed. They are
schemas, not records (the root README's record rule): ``data`` stays the dict written and read back,
where a key left out differs from one that is null, and no class here is ever built. ``EVENTS``
maps each type to its class; :func:`event_problems` checks a recorded event against it (a field the
class does not list, a listed field missing or of the wrong type). The dsh-session README's event
table is these classes, and a test keeps the two equal and runs the harness's code paths through
the checker, so a field recorded anywhere without being listed here fails the suite.

Plugins may record their own types; an unknown type is not a problem unless ``strict`` is asked.
This module is not imported by ``dsh.session`` itself: nothing on a command's path needs it.
"""

# No ``from __future__ import annotations``: TypedDict reads NotRequired from live annotations
# (on Python 3.11 a string annotation makes every key required).
import types
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, Union, get_args, get_origin, get_type_hints, is_typeddict

__all__ = [
    "EVENTS",
    "AssistantMessageData",
    "ContextMessageData",
    "ErrorData",
    "HookReportData",
    "HookResultData",
    "ModelRequestData",
    "SessionForkData",
    "SubagentEndData",
    "SubagentStartData",
    "ToolBeganData",
    "ToolCallData",
    "ToolCallRecord",
    "ToolInputUpdatedData",
    "ToolResultData",
    "TurnEndData",
    "TurnStartData",
    "UserMessageData",
    "event_problems",
    "type_name",
]


class TurnStartData(TypedDict):
    """``turn/start``: a turn opened (the session's write lock is held from here to ``turn/end``)."""

    turn_id: str
    """``<session id>:turn-<n>``, never reused; what ``DSH_TURN_ID`` holds for the turn's calls."""
    agent: str
    """The agent's name (``main``, or ``<agent_type>-<n>`` for a subagent)."""
    source: NotRequired[str]
    """Who opened a turn that is not a model's: ``exec``, ``outside``, ``session-end``, ``mcp``..."""


class TurnEndData(TypedDict):
    """``turn/end``: the turn closed; the flush that follows is the checkpoint."""

    turn_id: str
    blocked: NotRequired[str | None]
    """Why a UserPromptSubmit hook refused the prompt (null when it did not)."""
    interrupted: NotRequired[str]
    """The signal or cancellation that ended the turn (``SIGINT``, ...)."""
    failed: NotRequired[str]
    """The error the turn ended on (also recorded as an ``error`` event)."""
    stopped: NotRequired[str]
    """Why a hook stopped an outside turn (``continue: false``)."""


class UserMessageData(TypedDict):
    """``message/user``: the prompt, or a blocking Stop hook's reason sent on as the next prompt."""

    text: str
    source: NotRequired[str]
    """``stop_hook`` when a Stop hook's reason is the prompt."""


class ToolCallRecord(TypedDict):
    """One tool call as ``message/assistant`` records it."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: NotRequired[str]
    """Why the call could not be used as given (arguments that were not JSON, say)."""


class AssistantMessageData(TypedDict):
    """``message/assistant``: one model step."""

    text: str | None
    tool_calls: list[ToolCallRecord]
    reasoning: NotRequired[str]
    usage: NotRequired[dict[str, int]]
    """Token counts as the provider reported them (``input_tokens``, ``output_tokens``, ...)."""


class ContextMessageData(TypedDict):
    """``message/context``: text a hook added for the model (``additionalContext``, a blocking reason)."""

    text: str
    source: str
    """``hook``."""
    event: str
    """The hook event that added it."""


class ModelRequestData(TypedDict):
    """``model/request``: the model and the tools it was offered (once per turn, again when the offer changes)."""

    model: str
    tools: list[dict[str, Any]]
    """The tool specs as JSON (name, description, parameters)."""
    tools_sha256: str
    """SHA-256 over the specs' canonical JSON."""


class ToolCallData(TypedDict):
    """``tool/call``: a call about to run (before its PreToolUse hooks)."""

    call_id: str
    """A safe id (the session-id rule); what ``DSH_TOOL_CALL_ID`` holds."""
    name: str
    arguments: dict[str, Any]
    supplied_call_id: NotRequired[str]
    """The id the caller gave, when it broke the rule and was replaced by ``call_id``."""


class ToolInputUpdatedData(TypedDict):
    """``tool/input_updated``: a PreToolUse hook rewrote the arguments (``updatedInput``)."""

    call_id: str
    name: str
    original: dict[str, Any]
    arguments: dict[str, Any]


class ToolBeganData(TypedDict):
    """``tool/began``: a command that began in a process that was killed before its turn's flush.

    Written ahead (beside the transcript) before every command starts and dropped when its turn is
    flushed; only a record no flush settled is folded into the transcript, so its outcome is unknown.
    """

    call_id: str
    name: str
    arguments: dict[str, Any]
    """What the command ran with (after any PreToolUse rewrite)."""
    turn_id: str | None
    """The turn it ran in, which was never flushed."""


class ToolResultData(TypedDict):
    """``tool/result``: what the call returned (or why it did not run)."""

    call_id: str
    name: str
    output: str
    """The text the model reads."""
    is_error: bool
    data: dict[str, Any]
    """The tool's record: for ``bash``, dsh-bash's ``ExecResult`` record (``exit_code``, ``stdout``,
    ``stderr``, ``timed_out``, spills...); ``blocked: true`` when a hook refused the call."""


class HookReportData(TypedDict):
    """One hook run, as a ``hook/result`` event lists it."""

    dialect: str
    """``claude`` or ``codex``."""
    event: str
    command: str
    exit_code: int | None
    blocked: bool
    stop: bool
    reason: str | None
    error: str | None
    stop_reason: NotRequired[str]
    decision: NotRequired[str]
    updated_input: NotRequired[dict[str, Any]]
    additional_context: NotRequired[str]
    system_message: NotRequired[str]
    timed_out: NotRequired[bool]
    background: NotRequired[bool]
    stderr: NotRequired[str]


class HookResultData(TypedDict):
    """``hook/result``: what the hooks of one event did (recorded only when some hook ran or warned)."""

    event: str
    """The hook event (``PreToolUse``, ...) or ``async`` for background hooks that finished."""
    reports: list[HookReportData]
    warnings: NotRequired[list[str]]


class SubagentStartData(TypedDict):
    """``subagent/start``: a subagent's session was made (``spawn_agent``)."""

    session_id: str
    agent_id: str
    agent_type: str


class SubagentEndData(TypedDict):
    """``subagent/end``: the subagent's turn ended; ``text`` is its last message."""

    session_id: str
    text: str | None
    stopped: NotRequired[str]
    """Why a SubagentStart hook stopped it before it ran."""


class SessionForkData(TypedDict):
    """``session/fork``: the first event after a fork's seed (``dsh sessions fork``)."""

    parent_session: str
    at_turn: int
    seed_length: int


class ErrorData(TypedDict):
    """``error``: the failure a turn ended on."""

    message: str


EVENTS: Mapping[str, type] = types.MappingProxyType(
    {
        "turn/start": TurnStartData,
        "turn/end": TurnEndData,
        "message/user": UserMessageData,
        "message/assistant": AssistantMessageData,
        "message/context": ContextMessageData,
        "model/request": ModelRequestData,
        "tool/call": ToolCallData,
        "tool/input_updated": ToolInputUpdatedData,
        "tool/result": ToolResultData,
        "tool/began": ToolBeganData,
        "hook/result": HookResultData,
        "subagent/start": SubagentStartData,
        "subagent/end": SubagentEndData,
        "session/fork": SessionForkData,
        "error": ErrorData,
    }
)
"""Every event type dsh's harness records, to the class of its ``data``."""


def event_problems(type: str, data: Mapping[str, Any], *, strict: bool = False) -> list[str]:
    """What is wrong with an event of ``type`` recording ``data``, one sentence each; empty when nothing is.

    Sentences name the event type and the field's path in ``data`` (``reports[0].exit_code``). A type
    not in :data:`EVENTS` is a plugin's own and is not checked, unless ``strict``.
    """
    shape = EVENTS.get(type)
    if shape is None:
        return [f"event type '{type}' is not one dsh records (known: {', '.join(EVENTS)})"] if strict else []
    return [f"'{type}' event: {problem}" for problem in _object_problems(shape, data, "")]


def _object_problems(shape: type, data: Mapping[str, Any], path: str) -> list[str]:
    hints = get_type_hints(shape)
    required: frozenset[str] = shape.__required_keys__  # type: ignore[attr-defined]
    problems = [f"field '{path}{key}' is not one {shape.__name__} lists" for key in data if key not in hints]
    problems += [f"field '{path}{key}' is missing" for key in sorted(required - set(data))]
    for key, value in data.items():
        if key in hints:
            problems += _value_problems(hints[key], value, f"{path}{key}")
    return problems


def _value_problems(hint: Any, value: Any, path: str) -> list[str]:
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        fits = any(not _value_problems(option, value, path) for option in get_args(hint))
    elif is_typeddict(hint) and isinstance(value, dict):
        return _object_problems(hint, value, f"{path}.")
    elif origin is list and isinstance(value, list):
        (item,) = get_args(hint)
        return [p for i, v in enumerate(value) for p in _value_problems(item, v, f"{path}[{i}]")]
    elif origin is dict and isinstance(value, dict):
        _, item = get_args(hint)
        return [p for k, v in value.items() for p in _value_problems(item, v, f"{path}.{k}")]
    elif hint is int:  # a bool is an int to Python, not to a transcript's reader
        fits = isinstance(value, int) and value.__class__ is not bool
    elif hint is type(None):
        fits = value is None
    else:
        fits = hint is Any or (origin is None and not is_typeddict(hint) and isinstance(value, hint))
    return [] if fits else [f"field '{path}' is {_kind(value)}, not {type_name(hint)}"]


def type_name(hint: Any) -> str:
    """A field's type as the README's event table writes it: ``string``, ``string or null``,
    ``ToolCallRecord[]``, ``object``, ``object of integer``."""
    if hint is Any:
        return "any"
    if hint is type(None):
        return "null"
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        return " or ".join(type_name(option) for option in get_args(hint))
    if origin is list:
        return f"{type_name(get_args(hint)[0])}[]"
    if is_typeddict(hint):
        return str(hint.__name__)
    if origin is dict:
        item = get_args(hint)[1]
        return "object" if item is Any else f"object of {type_name(item)}"
    return {str: "string", bool: "boolean", int: "integer"}.get(hint, str(hint))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "an array"}.get(
        value.__class__, type(value).__name__
    )
