"""A session's history as Chat Completions messages (the tools are dsh-session's ``openai_tool``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from dsh.agent import Answered, Said, conversation
from dsh.session import SessionEvent


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
