"""The turn's records are NamedTuples; a script reads its steps and calls as mappings, in plain words."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.agent import ModelStep, ScriptError, ToolCall
from dsh.agent.script import Script, ScriptTurn, _CallForm, _StepForm, load_script


def test_a_tool_call_refuses_an_empty_name_and_replace_keeps_the_checked_one() -> None:
    with pytest.raises(ValueError, match="has an empty name"):
        ToolCall(name="")
    call = ToolCall(name="bash", arguments={"command": "true"})
    assert (call.id, call.error) == (None, None)
    assert call._replace(id="c1") == ToolCall(name="bash", id="c1", arguments={"command": "true"})
    assert call.to_json() == {"id": None, "name": "bash", "arguments": {"command": "true"}}
    assert ToolCall(name="x", error="bad").to_json() == {"id": None, "name": "x", "arguments": {}, "error": "bad"}


def test_the_script_forms_name_exactly_the_records_fields() -> None:
    # The forms repeat the fields the records have (their types as a file gives them): they must not drift.
    assert set(_CallForm.model_fields) == set(ToolCall._fields)
    assert set(_StepForm.model_fields) == set(ModelStep._fields)


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(text)
    return path


def test_a_script_builds_the_records_with_their_defaults(tmp_path: Path) -> None:
    script = load_script(_script(tmp_path, "turns:\n - steps: [{tool_calls: [{name: bash}]}, {text: done}]\n"))
    call, done = script.turns[0].steps
    assert isinstance(call, ModelStep) and isinstance(call.tool_calls[0], ToolCall)
    assert call.tool_calls[0] == ToolCall(name="bash")
    assert done == ModelStep(text="done")
    # Written back as a file holds it, and read again to the same records; a record given as itself is kept.
    dumped = script.model_dump()
    assert dumped["turns"][0]["steps"][0]["tool_calls"] == [
        {"name": "bash", "id": None, "arguments": {}, "error": None}
    ]
    assert Script.model_validate(dumped) == script
    assert Script(turns=[ScriptTurn(steps=[done])]).turns[0].steps[0] is done


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ("[{tool_calls: [{name: ''}]}]", "field 'turns[0].steps[0].tool_calls[0]' has an empty name"),
        ("[{tool_calls: [{arguments: {}}]}]", "field 'turns[0].steps[0].tool_calls[0].name' is required"),
        ("[{txt: x}]", "field 'turns[0].steps[0].txt' is not a known field (check its spelling)"),
        ("[{tool_calls: bash}]", "field 'turns[0].steps[0].tool_calls' must be a list"),
        ("[{tool_calls: null}]", "field 'turns[0].steps[0].tool_calls' must be a list"),
        ("[{tool_calls: [bash]}]", "field 'turns[0].steps[0].tool_calls[0]' must be a mapping"),
        ("[{tool_calls: [[bash]]}]", "field 'turns[0].steps[0].tool_calls[0]' must be a mapping"),
        (
            "[{tool_calls: [{name: bash, arguments: [1]}]}]",
            "field 'turns[0].steps[0].tool_calls[0].arguments' must be a mapping",
        ),
        ("[hi]", "field 'turns[0].steps[0]' must be a mapping"),
        ("[[hi]]", "field 'turns[0].steps[0]' must be a mapping"),
        ("[{usage: {a: x}}]", "field 'turns[0].steps[0].usage.a' must be a whole number"),
    ],
)
def test_a_script_step_or_call_is_a_mapping_and_its_faults_are_plain_words(
    tmp_path: Path, steps: str, message: str
) -> None:
    path = _script(tmp_path, f"turns:\n - steps: {steps}\n")
    with pytest.raises(ScriptError) as caught:
        load_script(path)
    assert str(caught.value) == f"{path}: {message}"
