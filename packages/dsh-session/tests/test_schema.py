"""Tool specs exported for function-calling APIs: OpenAI (strict mode too) and Anthropic."""

from __future__ import annotations

import pytest

from dsh.session import (
    SchemaError,
    ToolSpec,
    anthropic_tool,
    drop_nulls,
    is_safe_id,
    openai_tool,
    strict_problems,
    strict_schema,
)

SPEC = ToolSpec(
    name="probe",
    description="A probe.",
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
)


def test_strict_mode_requires_every_property_closes_every_object_and_makes_optionals_nullable() -> None:
    assert strict_problems(SPEC.parameters)  # as written, not strict
    made = strict_schema(SPEC.parameters)
    assert strict_problems(made) == []
    assert made["required"] == ["command", "mode", "tags", "either"]
    assert made["properties"]["command"] == {"type": "string"}
    assert made["properties"]["mode"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert made["properties"]["tags"]["items"]["additionalProperties"] is False
    assert made["properties"]["tags"]["items"]["required"] == ["k"]
    assert made["properties"]["either"]["anyOf"][-1] == {"type": "null"}
    assert SPEC.parameters["properties"]["mode"]["default"] == "a"  # the spec itself is unchanged


def test_a_free_form_object_cannot_be_strict_and_the_error_names_tool_and_place() -> None:
    loose = {"type": "object", "properties": {"env": {"type": "object"}}, "required": ["env"]}
    with pytest.raises(SchemaError, match=r"tool 'x' .*'properties.env'.*free-form") as caught:
        strict_schema(loose, tool="x")
    assert caught.value.tool == "x" and caught.value.path == "properties.env"


def test_drop_nulls_removes_the_nulls_strict_models_send_for_optionals_only() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": ["string", "null"]}},
        "required": ["a"],
    }
    assert drop_nulls({"a": None, "b": None, "c": None}, schema) == {"a": None, "c": None}


def test_export_shapes() -> None:
    tool = openai_tool(SPEC, strict=True)
    assert tool["type"] == "function" and tool["function"]["strict"] is True
    assert tool["function"]["name"] == "probe" and tool["function"]["description"] == "A probe."
    assert openai_tool(SPEC)["function"]["parameters"] == SPEC.parameters
    assert anthropic_tool(SPEC) == {"name": "probe", "description": "A probe.", "input_schema": SPEC.parameters}


def test_call_ids_share_the_session_id_rule() -> None:
    assert is_safe_id("call_abc-1.2") and is_safe_id("toolu_01ABC")
    assert not any(is_safe_id(v) for v in ("bad id", "", "../x", "a/b", "x" * 129, "ü", None, 3))
