"""A session's history as Chat Completions messages, and dsh's tools as function tools."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from dsh.agent import Answered, Said, conversation
from dsh.session import SessionEvent, ToolSpec


def arguments_json(arguments: object) -> str:
    """A tool call's arguments as the ``function.arguments`` string sent back to the model (compact JSON)."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def chat_messages(events: Iterable[SessionEvent], *, system: str = "") -> list[dict[str, Any]]:
    """The Chat Completions ``messages`` of a session: the one owner of that mapping.

    ``system`` (when non-empty) is the first message. Then, from :func:`dsh.agent.conversation`:
    a prompt, a Stop hook's steering or hook context is a ``user`` message; a model step is an
    ``assistant`` message (``content`` its text or null, ``tool_calls`` as function calls with
    compact JSON arguments), followed by one ``tool`` message per call, in call order, holding
    the call's output (an error's text as it was recorded). ``reasoning_content`` is sent back
    only on the steps after the last user prompt (the open exchange, as DeepSeek's thinking mode
    with tools asks) and only where the model gave some; earlier reasoning is dropped.
    """
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for item in conversation(events):
        if isinstance(item, Said):
            messages.append({"role": "user", "content": item.text})
            continue
        assert isinstance(item, Answered)
        message: dict[str, Any] = {"role": "assistant", "content": item.text or None}
        if item.reasoning and item.current:
            message["reasoning_content"] = item.reasoning
        if item.calls:
            message["tool_calls"] = [
                {
                    "id": call.get("id"),
                    "type": "function",
                    "function": {"name": call.get("name"), "arguments": arguments_json(call.get("arguments") or {})},
                }
                for call in item.calls
            ]
        messages.append(message)
        for outcome in item.outcomes:
            messages.append({"role": "tool", "tool_call_id": outcome.call_id, "content": outcome.output})
    return messages


def function_tools(specs: Sequence[ToolSpec], *, strict: bool = False) -> list[dict[str, Any]]:
    """dsh's tool specs as Chat Completions function tools, in registry order.

    With ``strict``, each schema is made strict (see :func:`strict_schema`) and marked so.
    """
    tools = []
    for spec in specs:
        function: dict[str, Any] = {"name": spec.name, "description": spec.description}
        parameters = dict(spec.parameters)
        if strict:
            function["parameters"] = strict_schema(parameters)
            function["strict"] = True
        else:
            function["parameters"] = parameters
        tools.append({"type": "function", "function": function})
    return tools


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` in the form OpenAI's strict mode accepts.

    Strict mode wants every object closed (``additionalProperties: false``) and every property
    listed in ``required``; an optional property is made nullable instead (``type: [T, "null"]``),
    and :func:`drop_nulls` removes the nulls the model then sends for it, so the tool sees the
    argument absent as before. Keywords strict mode refuses (``default``) are dropped.
    """
    out = {k: v for k, v in schema.items() if k != "default"}
    if out.get("type") == "object" or "properties" in out:
        properties = dict(out.get("properties") or {})
        required = set(out.get("required") or ())
        for name, sub in properties.items():
            fixed = strict_schema(dict(sub))
            if name not in required:
                kind = fixed.get("type")
                if isinstance(kind, str):
                    fixed["type"] = [kind, "null"]
                elif isinstance(kind, list) and "null" not in kind:
                    fixed["type"] = [*kind, "null"]
            properties[name] = fixed
        out["properties"] = properties
        out["required"] = list(properties)
        out["additionalProperties"] = False
    if isinstance(out.get("items"), dict):
        out["items"] = strict_schema(out["items"])
    return out


def drop_nulls(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments of a strict call with the nulls of properties the tool's own ``schema`` does not require removed."""
    required = set(schema.get("required") or ())
    return {k: v for k, v in arguments.items() if v is not None or k in required}
