"""The ``openai`` provider against a real loopback HTTP server speaking Chat Completions.

The official SDK is not patched: it sends real requests to :class:`dsh.testing.Endpoint`, which
answers with the recorded replies in ``fixtures/`` and keeps what was sent, so each test asserts
on the requests themselves (path, headers, bodies).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import Agent, ModelError, load_model
from dsh.harness import open_runtime
from dsh.loader import BootError, ModelChoice, Runtime
from dsh.models.openai import OpenAIConfig, OpenAIModel
from dsh.session import SESSIONS, TOOLS, Session, drop_nulls, openai_tool, strict_schema
from dsh.testing import Endpoint, load_exchanges
from tests.helpers import record_hook

FIXTURES = Path(__file__).parents[1] / "data" / "models" / "openai"
KEY = "sk-test-secret"
FAULTS: dict[str, dict[str, Any]] = json.loads((FIXTURES / "faults.json").read_text())["replies"]


@contextmanager
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    with open_runtime(env={"DSH_HOME": str(tmp_path / "home")}) as rt:
        yield rt


def model(endpoint: Endpoint, **config: Any) -> OpenAIModel:
    config.setdefault("model", "deepseek-chat")
    return OpenAIModel(OpenAIConfig(base_url=f"{endpoint.url}/v1", **config), env={"OPENAI_API_KEY": KEY})


def turn(rt: Runtime, session: Session, llm: Any, prompt: str) -> Any:
    return asyncio.run(Agent(rt.ctx, session, llm).run_turn(prompt))


def replies(name: str) -> list[dict[str, Any]]:
    return [e["response"] for e in load_exchanges(FIXTURES / name)]


def requests(name: str) -> list[dict[str, Any]]:
    return [e["request"] for e in load_exchanges(FIXTURES / name)]


def without_tools(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "tools"}


def test_two_turns_send_the_recorded_requests_and_record_reasoning_and_usage(tmp_path: Path) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(*replies("two_turns.json"))
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        llm = model(endpoint)
        first = turn(rt, session, llm, "Run one and two.")
        second = turn(rt, session, llm, "Now three.")
        specs = rt.ctx.require(TOOLS).specs()
    assert first.text == "Both ran: one, two." and second.text == "three"
    assert [c.name for c, _ in first.tool_results] == ["bash", "bash"]
    assert [r.output for _, r in first.tool_results] == ["one\n[exit code: 0]", "two\n[exit code: 0]"]
    expected = requests("two_turns.json")
    for seen, recorded in zip(endpoint.seen, expected, strict=True):
        assert seen.method == "POST" and seen.path == "/v1/chat/completions"
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        assert seen.headers["content-type"] == "application/json"
        assert seen.headers["user-agent"].startswith("AsyncOpenAI/Python")
        assert without_tools(seen.body) == recorded["body"]
        assert seen.body["tools"] == [openai_tool(spec) for spec in specs]
        assert [t["function"]["name"] for t in seen.body["tools"]] == recorded["tool_names"]
    # The open exchange's reasoning goes back to the model; the next turn's requests drop it.
    assert endpoint.seen[1].body["messages"][1]["reasoning_content"] == "Two commands, run at once."
    assert all("reasoning_content" not in m for m in endpoint.seen[2].body["messages"])
    said = [e.data for e in session.history if e.type == "message/assistant"]
    assert said[0]["reasoning"] == "Two commands, run at once."
    assert said[0]["usage"] == {
        "input_tokens": 120,
        "output_tokens": 40,
        "total_tokens": 160,
        "reasoning_tokens": 12,
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": 120,
    }
    assert KEY not in json.dumps([e.data for e in session.history])


def test_a_resumed_or_forked_session_sends_exactly_what_the_live_one_did(tmp_path: Path) -> None:
    """Turn 2's requests of a resumed session (and of a fork) equal the live session's, byte for byte."""
    live = Endpoint()
    with live, runtime(tmp_path / "live") as rt:
        live.queue(*replies("two_turns.json"))
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        turn(rt, session, model(live), "Run one and two.")
        turn(rt, session, model(live), "Now three.")
    resumed = Endpoint()
    with resumed:
        resumed.queue(*replies("two_turns.json"))
        with runtime(tmp_path / "resumed") as rt:
            session = rt.ctx.require(SESSIONS).create(str(tmp_path))
            turn(rt, session, model(resumed), "Run one and two.")
            session_id = session.id
        with runtime(tmp_path / "resumed") as rt:
            store = rt.ctx.require(SESSIONS)
            turn(rt, store.resume(session_id), model(resumed), "Now three.")
    assert [s.body for s in resumed.seen] == [s.body for s in live.seen]
    forked = Endpoint()
    with forked, runtime(tmp_path / "resumed") as rt:
        forked.queue(*replies("two_turns.json")[2:])
        store = rt.ctx.require(SESSIONS)
        first_turn = [e.type for e in store.resume(session_id).history].index("turn/end") + 1
        turn(rt, store.fork(session_id, first_turn), model(forked), "Now three.")
    assert [s.body for s in forked.seen] == [s.body for s in live.seen[2:]]


def test_a_streamed_answer_gives_the_same_step_with_parallel_calls_reasoning_and_usage(tmp_path: Path) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(*replies("stream.json"))
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        session.record("message/user", text="Look twice.")
        step = asyncio.run(model(endpoint, stream=True, model="deepseek-reasoner").step(session, []))
    body = endpoint.seen[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "Look twice."}] and "tools" not in body
    assert step.text == "Checking now." and step.reasoning == "Look twice."
    assert [(c.id, c.name, c.arguments) for c in step.tool_calls] == [
        ("call_a", "bash", {"command": "echo a"}),
        ("call_b", "bash", {"command": "echo b"}),
    ]
    assert step.usage == {"input_tokens": 50, "output_tokens": 30, "total_tokens": 80, "reasoning_tokens": 9}


def _fails(tmp_path: Path, endpoint_replies: list[dict[str, Any]], **config: Any) -> tuple[str, Endpoint, Session]:
    """Run a turn that fails; return the error line, the endpoint and the session (its lock released)."""
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(*endpoint_replies)
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        with pytest.raises(ModelError) as caught:
            turn(rt, session, model(endpoint, **config), "hello")
        assert not session.locked
        endpoint.queue(FAULTS["ok"])  # the session resumes cleanly: the next turn runs and is recorded
        assert turn(rt, rt.ctx.require(SESSIONS).resume(session.id), model(endpoint), "again").text == "fine"
        message = str(caught.value)
        assert f"model provider openai at {endpoint.url}/v1: " in message and KEY not in message
        ends = [e.data for e in rt.ctx.require(SESSIONS).resume(session.id).history if e.type == "turn/end"]
        assert ends[0]["failed"] == message and "failed" not in ends[1]
        return message, endpoint, session


def test_a_refused_key_is_one_line_naming_the_variable_never_the_key(tmp_path: Path) -> None:
    message, endpoint, _ = _fails(tmp_path, [FAULTS["unauthorized"]])
    assert "the key was refused (401: Incorrect API key provided" in message and "$OPENAI_API_KEY" in message
    assert len(endpoint.seen) == 2  # never retried


def test_a_rate_limit_is_retried_after_its_retry_after_then_succeeds(tmp_path: Path) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(FAULTS["rate_limited"], FAULTS["ok"])
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        assert turn(rt, session, model(endpoint), "hello").text == "fine"
    assert len(endpoint.seen) == 2 and endpoint.seen[0].body == endpoint.seen[1].body


def test_a_lasting_rate_limit_fails_the_turn_after_the_bounded_retries(tmp_path: Path) -> None:
    message, endpoint, _ = _fails(tmp_path, [FAULTS["rate_limited"]] * 2, max_retries=1)
    assert "rate limited (429: Rate limit reached for requests), still after 1 retries" in message
    assert len(endpoint.seen) == 3


def test_a_server_error_fails_the_turn(tmp_path: Path) -> None:
    message, _, _ = _fails(tmp_path, [FAULTS["server_error"]], max_retries=0)
    assert "server error (503: The server is overloaded" in message


def test_a_timeout_fails_the_turn(tmp_path: Path) -> None:
    message, _, _ = _fails(tmp_path, [FAULTS["slow"]], max_retries=0, timeout=0.5)
    assert message.endswith("no answer within 0.5 s (raise `timeout` in the provider's config)")


def test_a_reply_without_choices_fails_the_turn(tmp_path: Path) -> None:
    message, _, _ = _fails(tmp_path, [FAULTS["no_choices"]])
    assert message.endswith("the server answered a reply with no choices")


def test_a_refused_connection_and_a_missing_key_are_one_line_each(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with runtime(tmp_path) as rt:
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        llm = OpenAIModel(
            OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0), env={"OPENAI_API_KEY": KEY}
        )
        with pytest.raises(ModelError, match=rf"^model provider openai at http://127.0.0.1:{port}/v1: cannot connect"):
            turn(rt, session, llm, "hello")
        keyless = OpenAIModel(OpenAIConfig(base_url="http://127.0.0.1:9/v1", api_key_env="DEEPSEEK_API_KEY"), env={})
        with pytest.raises(ModelError, match=r"no API key: \$DEEPSEEK_API_KEY is not set"):
            turn(rt, session, keyless, "hello")
        assert not session.locked


def test_malformed_arguments_and_an_unknown_tool_go_back_to_the_model_as_tool_errors(tmp_path: Path) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(FAULTS["malformed_arguments"], FAULTS["ok"])
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        result = turn(rt, session, model(endpoint), "go")
    assert result.text == "fine"
    outputs = {c.id: r for c, r in result.tool_results}
    assert all(r.is_error for r in outputs.values())
    assert outputs["call_bad"].output.startswith("the arguments of this bash call are not valid JSON (")
    assert "a JSON list, not an object" in outputs["call_list"].output
    assert outputs["call_nosuch"].output.startswith("no tool named 'teleport'; tools: ")
    tool_messages = [m for m in endpoint.seen[1].body["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        (cid, outputs[cid].output) for cid in ("call_bad", "call_list", "call_nosuch")
    ]


def test_strict_mode_makes_dsh_schemas_strict_and_drops_the_nulls_of_optional_arguments(tmp_path: Path) -> None:
    with runtime(tmp_path) as rt:
        specs = rt.ctx.require(TOOLS).specs()
    for tool in (openai_tool(spec, strict=True) for spec in specs):
        schema = tool["function"]["parameters"]
        assert tool["function"]["strict"] is True and schema["additionalProperties"] is False
        assert set(schema["required"]) == set(schema["properties"])
    bash = next(s for s in specs if s.name == "bash")
    optional = [k for k in bash.parameters["properties"] if k not in bash.parameters.get("required", ())]
    assert optional, "the bash tool has optional arguments strict mode must make nullable"
    strict = strict_schema(dict(bash.parameters))
    assert all("null" in strict["properties"][k]["type"] for k in optional)
    sent = {"command": "ls", **dict.fromkeys(optional)}
    assert drop_nulls(sent, dict(bash.parameters)) == {"command": "ls"}


def test_the_entry_point_loads_with_the_sdk_environment_defaults_and_refuses_unknown_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{endpoint.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_MODEL", "local-model")
        llm = load_model(rt, ModelChoice(provider="openai"))
        assert llm.name == "local-model"
        endpoint.queue(FAULTS["ok"])
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        assert turn(rt, session, llm, "hi").text == "fine"
        assert endpoint.seen[0].body["model"] == "local-model"
    with runtime(tmp_path) as rt, pytest.raises(BootError, match=r"field 'config.base' is not a known field"):
        load_model(rt, ModelChoice(provider="openai", config={"base": "x"}))


@pytest.mark.parametrize("offset", [0, 150, 285, 294, 299, 320])
def test_a_key_the_server_names_at_any_offset_reaches_no_line_record_or_hook_even_in_part(
    tmp_path: Path, offset: int
) -> None:
    # The key is blanked before the server's message is cut to 300 characters: cut first, its first
    # characters stayed (offset 285 left "sk-test-secr" on stderr and twice in the transcript).
    hooked = tmp_path / "stop-failure.jsonl"
    record_hook(tmp_path / "home", "StopFailure", hooked)
    said = f"{'x' * offset}{KEY} is not a key this server knows; {'y' * 40}"
    refused = {"status": 400, "json": {"error": {"message": said, "type": "invalid_request_error"}}}
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(refused)
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        with pytest.raises(ModelError) as caught:
            turn(rt, session, model(endpoint), "hello")
        path = session.locate().path  # type: ignore[union-attr]
    message = str(caught.value)
    assert "the request was refused (400: " in message
    assert ("***" in message) == (offset + len("***") <= 300)  # blanked, then cut to 300 characters
    for text in (message, Path(path).read_text(), hooked.read_text()):
        assert KEY[:6] not in text
    assert json.loads(hooked.read_text().splitlines()[0])["hook_event_name"] == "StopFailure"
