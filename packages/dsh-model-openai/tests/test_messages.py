"""Chat Completions messages from a session's events, and dsh's tool specs as the (strict) function tools sent."""

from __future__ import annotations

from dsh.models.openai import chat_messages
from dsh.session import SessionEvent, ToolSpec, drop_nulls, openai_tool, strict_schema

SPEC = ToolSpec(
    name="bash",
    description="Run a command.",
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout": {"type": "number", "default": 120},
            "env": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
        "required": ["command"],
    },
)


def test_chat_messages_answer_every_call_and_place_hook_context_after_the_answers() -> None:
    events = [
        SessionEvent(type="message/user", data={"text": "go"}),
        SessionEvent(
            type="message/assistant",
            data={"text": "", "tool_calls": [{"id": "a", "name": "bash", "arguments": {"command": "x"}}]},
        ),
        SessionEvent(type="tool/call", data={"call_id": "a", "name": "bash", "arguments": {}}),
        SessionEvent(type="message/context", data={"text": "hook says hi", "source": "hook"}),
        SessionEvent(type="turn/end", data={"interrupted": "SIGINT"}),
        SessionEvent(type="message/user", data={"text": "next"}),
    ]
    assert chat_messages(events, system="be brief") == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "bash", "arguments": '{"command":"x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "no result: the turn ended before this call finished"},
        {"role": "user", "content": "hook says hi"},
        {"role": "user", "content": "next"},
    ]


def test_strict_mode_closes_every_object_and_makes_optional_arguments_nullable() -> None:
    tool = openai_tool(SPEC, strict=True)  # dsh-session's, the one owner: what the model sends
    schema = tool["function"]["parameters"]
    assert tool["function"]["strict"] is True
    assert schema == {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout": {"type": ["number", "null"]},
            "env": {
                "type": ["object", "null"],
                "properties": {"name": {"type": ["string", "null"]}},
                "required": ["name"],
                "additionalProperties": False,
            },
        },
        "required": ["command", "timeout", "env"],
        "additionalProperties": False,
    }
    assert strict_schema(dict(SPEC.parameters)) == schema
    assert drop_nulls({"command": "ls", "timeout": None, "env": None}, dict(SPEC.parameters)) == {"command": "ls"}
    plain = openai_tool(SPEC)
    assert plain == {
        "type": "function",
        "function": {"name": "bash", "description": "Run a command.", "parameters": dict(SPEC.parameters)},
    }
