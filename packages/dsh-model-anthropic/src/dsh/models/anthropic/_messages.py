"""A session's history as Messages API messages, and dsh's tools as Anthropic tool definitions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dsh.agent import Answered, Said, conversation
from dsh.session import SessionEvent, ToolSpec

EMPTY_OUTPUT = "(no output)"
"""A tool result's content when the tool printed nothing (the API refuses empty text)."""


def messages(events: Iterable[SessionEvent]) -> list[dict[str, Any]]:
    """The Messages API ``messages`` of a session: the one owner of that mapping.

    From :func:`dsh.agent.conversation`: a prompt, a Stop hook's steering or hook context is a
    ``text`` block of a ``user`` message; a model step is an ``assistant`` message of its text
    block and one ``tool_use`` block per call; what answered the calls is one ``tool_result``
    block each (``is_error`` as recorded) opening the next ``user`` message. Consecutive blocks of
    one role share a message, as the API wants (a failed turn's prompt is followed by the next
    prompt in the same ``user`` message). Empty texts are left out (the API refuses them).
    The system prompt is the request's ``system`` field, not a message.
    """
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for item in conversation(events):
        if isinstance(item, Said):
            add("user", [{"type": "text", "text": item.text}] if item.text else [])
            continue
        assert isinstance(item, Answered)
        blocks: list[dict[str, Any]] = [{"type": "text", "text": item.text}] if item.text else []
        blocks += [
            {"type": "tool_use", "id": call.get("id"), "name": call.get("name"), "input": call.get("arguments") or {}}
            for call in item.calls
        ]
        add("assistant", blocks)
        add(
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": outcome.call_id,
                    "content": outcome.output or EMPTY_OUTPUT,
                    "is_error": outcome.is_error,
                }
                for outcome in item.outcomes
            ],
        )
    return out


def tool_definitions(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """dsh's tool specs as Messages API tools (``name``, ``description``, ``input_schema``), in registry order."""
    return [{"name": s.name, "description": s.description, "input_schema": dict(s.parameters)} for s in specs]
