"""Messages API messages from a session's events."""

from __future__ import annotations

from dsh.models.anthropic import messages, tool_definitions
from dsh.session import SessionEvent, ToolSpec


def test_messages_answer_every_call_and_merge_one_role_s_blocks() -> None:
    events = [
        SessionEvent(type="message/user", data={"text": "go"}),
        SessionEvent(
            type="message/assistant",
            data={"text": "ok", "tool_calls": [{"id": "a", "name": "bash", "arguments": {"command": "x"}}]},
        ),
        SessionEvent(type="message/context", data={"text": "from a hook", "source": "hook"}),
        SessionEvent(type="message/user", data={"text": "stop?", "source": "stop_hook"}),
    ]
    assert messages(events) == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "a", "name": "bash", "input": {"command": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "a",
                    "content": "no result: the turn ended before this call finished",
                    "is_error": True,
                },
                {"type": "text", "text": "from a hook"},
                {"type": "text", "text": "stop?"},
            ],
        },
    ]


def test_tools_are_sent_with_their_schema_as_input_schema() -> None:
    spec = ToolSpec(name="bash", description="Run.", parameters={"type": "object", "properties": {}})
    assert tool_definitions([spec]) == [
        {"name": "bash", "description": "Run.", "input_schema": {"type": "object", "properties": {}}}
    ]
