"""The turn's and a script's records are NamedTuples; a script reads its steps and calls as mappings, in plain words."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.agent import ModelStep, ScriptError, ToolCall
from dsh.agent.script import Script, ScriptTurn, load_script
from dsh.loader.validation import validate_named_tuple
from dsh.session.persistence import json_bytes, json_loads


def test_a_tool_call_refuses_an_empty_name_and_replace_keeps_the_checked_one() -> None:
    with pytest.raises(ValueError, match="has an empty name"):
        ToolCall(name="")
    call = ToolCall(name="bash", arguments={"command": "true"})
    assert (call.id, call.error) == (None, None)
    assert call._replace(id="c1") == ToolCall(name="bash", id="c1", arguments={"command": "true"})
    assert call.to_json() == {"id": None, "name": "bash", "arguments": {"command": "true"}}
    assert ToolCall(name="x", error="bad").to_json() == {"id": None, "name": "x", "arguments": {}, "error": "bad"}


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
    assert isinstance(script, Script) and isinstance(script.turns[0], ScriptTurn)
    # Written back as dsh's JSON writes a record (an object of its fields), read again, and written the same.
    dumped = json_loads(json_bytes(script))
    assert dumped["turns"][0]["steps"][0]["tool_calls"] == [
        {"name": "bash", "id": None, "arguments": {}, "error": None}
    ]
    again = validate_named_tuple(Script, dumped)
    assert again.turns[0].steps[0].tool_calls == [ToolCall(name="bash")]
    assert json_loads(json_bytes(again)) == dumped


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
        ("[{usage: {a: true}}]", "field 'turns[0].steps[0].usage.a' must be a whole number"),
    ],
)
def test_a_script_step_or_call_is_a_mapping_and_its_faults_are_plain_words(
    tmp_path: Path, steps: str, message: str
) -> None:
    path = _script(tmp_path, f"turns:\n - steps: {steps}\n")
    with pytest.raises(ScriptError) as caught:
        load_script(path)
    assert str(caught.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[{user: hi}]", "the top level must be a mapping of fields"),
        ("turns: [[hi]]", "field 'turns[0]' must be a mapping"),
        ("turns: hi", "field 'turns' must be a list"),
        ("subagents: {helper: [{text: 1}]}", "field 'subagents.helper[0].text' must be a string"),
        ("modle: x", "field 'modle' is not a known field (check its spelling)"),
    ],
)
def test_a_script_is_a_mapping_of_its_records_fields(tmp_path: Path, text: str, message: str) -> None:
    path = _script(tmp_path, text)
    with pytest.raises(ScriptError) as caught:
        load_script(path)
    assert str(caught.value) == f"{path}: {message}"


def test_an_empty_script_file_is_an_empty_script(tmp_path: Path) -> None:
    assert load_script(_script(tmp_path, "")) == Script()
