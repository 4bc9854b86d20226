"""The loop's errors carry their subject as attributes, and its errors module draws the whole tree."""

from __future__ import annotations

from pathlib import Path

import pytest

import dsh.agent
from dsh.agent import ScriptError, TranscriptNotSaved, _errors
from dsh.agent.script import load_script


def test_the_errors_docstring_draws_every_error_class() -> None:
    classes = [getattr(_errors, name) for name in _errors.__all__]
    assert {c.__name__ for c in classes} == {"ModelError", "ScriptError", "TranscriptNotSaved", "TurnError"}
    for cls in classes:
        assert f"{cls.__name__} " in (_errors.__doc__ or ""), cls
    assert dsh.agent.TranscriptNotSaved is TranscriptNotSaved


def test_a_script_error_names_its_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    with pytest.raises(ScriptError, match="cannot read script") as caught:
        load_script(missing)
    assert caught.value.path == str(missing)


def test_a_transcript_not_saved_keeps_its_cause_and_result() -> None:
    cause = OSError(28, "No space left on device")
    error = TranscriptNotSaved("s-1", cause, result="what ran")
    assert (error.session_id, error.cause, error.result) == ("s-1", cause, "what ran")
    assert "s-1" in str(error) and "No space left" in str(error)


@pytest.mark.parametrize("offset", [0, 100, 285, 290, 294, 296, 320])
def test_a_key_is_blanked_before_the_servers_message_is_cut(offset: int) -> None:
    from dsh.agent import provider_error, status_reason

    key = "sk-live-0123456789abcdef"
    detail = f"{'x' * offset}{key} was refused"
    what = status_reason(400, detail, key=key, retries=0, key_variable="OPENAI_API_KEY")
    message = str(provider_error("openai", "http://127.0.0.1:9/v1", what, key=key))
    assert key[:6] not in message


def test_a_prefix_the_server_itself_echoes_is_blanked_too() -> None:
    from dsh.agent._provider import blank_key

    key = "sk-test-secret"
    assert (
        blank_key("Incorrect API key provided: sk-test-******cret.", key)
        == "Incorrect API key provided: *********cret."
    )
    assert blank_key(f"{key} and {key[:9]}", key) == "*** and ***"
    assert blank_key("sk-te is too short to tell", key) == "sk-te is too short to tell"
    assert blank_key("no key", "no-key") == "no key"
