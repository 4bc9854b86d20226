"""The ``anthropic`` provider against a real loopback HTTP server speaking the Messages API.

The official SDK is not patched: it sends real requests to :class:`dsh.testing.Endpoint`, which
answers with the recorded replies in ``fixtures/`` and keeps what was sent.
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
from dsh.models.anthropic import AnthropicConfig, AnthropicModel, tool_definitions
from dsh.session import SESSIONS, TOOLS, Session
from dsh.testing import Endpoint, load_exchanges
from tests.helpers import record_hook

FIXTURES = Path(__file__).parents[1] / "data" / "models" / "anthropic"
KEY = "sk-ant-test-secret"
FAULTS: dict[str, dict[str, Any]] = json.loads((FIXTURES / "faults.json").read_text())["replies"]


@contextmanager
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    with open_runtime(env={"DSH_HOME": str(tmp_path / "home")}) as rt:
        yield rt


def model(endpoint: Endpoint, **config: Any) -> AnthropicModel:
    return AnthropicModel(AnthropicConfig(base_url=endpoint.url, **config), env={"ANTHROPIC_API_KEY": KEY})


def turn(rt: Runtime, session: Session, llm: Any, prompt: str) -> Any:
    return asyncio.run(Agent(rt.ctx, session, llm).run_turn(prompt))


def exchanges(name: str) -> list[dict[str, Any]]:
    return load_exchanges(FIXTURES / name)


def test_two_turns_send_the_recorded_requests(tmp_path: Path) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(*[e["response"] for e in exchanges("two_turns.json")])
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        llm = model(endpoint, system="Be brief.")
        first = turn(rt, session, llm, "Run one and two.")
        second = turn(rt, session, llm, "Now print nothing.")
        specs = rt.ctx.require(TOOLS).specs()
    assert first.text == "Both ran: one, two." and second.text == "It printed nothing."
    for seen, recorded in zip(endpoint.seen, exchanges("two_turns.json"), strict=True):
        assert seen.method == "POST" and seen.path == "/v1/messages"
        # The SDK of this release range sends the key as a bearer token (older ones used x-api-key).
        assert seen.headers["authorization"] == f"Bearer {KEY}" and "anthropic-version" in seen.headers
        assert {k: v for k, v in seen.body.items() if k != "tools"} == recorded["request"]["body"]
        assert seen.body["tools"] == tool_definitions(specs)
    said = [e.data for e in session.history if e.type == "message/assistant"]
    assert said[0]["usage"] == {"input_tokens": 300, "output_tokens": 60, "cache_read_input_tokens": 100}
    assert KEY not in json.dumps([e.data for e in session.history])


def test_a_resumed_session_sends_exactly_what_the_live_one_did(tmp_path: Path) -> None:
    replies = [e["response"] for e in exchanges("two_turns.json")]
    with Endpoint() as live, runtime(tmp_path / "live") as rt:
        live.queue(*replies)
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        turn(rt, session, model(live), "Run one and two.")
        turn(rt, session, model(live), "Now print nothing.")
    with Endpoint() as resumed:
        resumed.queue(*replies)
        with runtime(tmp_path / "resumed") as rt:
            session = rt.ctx.require(SESSIONS).create(str(tmp_path))
            turn(rt, session, model(resumed), "Run one and two.")
        with runtime(tmp_path / "resumed") as rt:
            turn(rt, rt.ctx.require(SESSIONS).resume(session.id), model(resumed), "Now print nothing.")
    assert [s.body for s in resumed.seen] == [s.body for s in live.seen]


def test_a_streamed_answer_gives_the_same_step(tmp_path: Path) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(*[e["response"] for e in exchanges("stream.json")])
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        session.record("message/user", text="Look twice.")
        step = asyncio.run(model(endpoint, stream=True).step(session, []))
    body = endpoint.seen[0].body
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Look twice."}]}]
    assert step.text == "Checking now."
    assert [(c.id, c.name, c.arguments) for c in step.tool_calls] == [
        ("toolu_a", "bash", {"command": "echo a"}),
        ("toolu_b", "bash", {"command": "echo b"}),
    ]
    assert step.usage == {"input_tokens": 50, "output_tokens": 33}


@pytest.mark.parametrize(
    ("replies", "config", "expected", "sent"),
    [
        (["unauthorized"], {}, "the key was refused (401: invalid x-api-key); check $ANTHROPIC_API_KEY", 1),
        (["rate_limited"] * 2, {"max_retries": 1}, "rate limited (429: Number of request tokens", 2),
        (["overloaded"], {"max_retries": 0}, "server error (529: Overloaded), still after 0 retries", 1),
        (["slow"], {"max_retries": 0, "timeout": 0.5}, "no answer within 0.5 s", 1),
    ],
)
def test_a_provider_fault_is_one_line_and_the_session_resumes(
    tmp_path: Path, replies: list[str], config: dict[str, Any], expected: str, sent: int
) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(*[FAULTS[r] for r in replies])
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        with pytest.raises(ModelError) as caught:
            turn(rt, session, model(endpoint, **config), "hello")
        message = str(caught.value)
        assert message.startswith(f"model provider anthropic at {endpoint.url}: ") and expected in message
        assert KEY not in message and len(endpoint.seen) == sent and not session.locked
        endpoint.queue(FAULTS["ok"])
        assert turn(rt, rt.ctx.require(SESSIONS).resume(session.id), model(endpoint), "again").text == "fine"
        # The failed turn's prompt and the next one share one user message.
        assert endpoint.seen[-1].body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "again"}]}
        ]
        ends = [e.data for e in rt.ctx.require(SESSIONS).resume(session.id).history if e.type == "turn/end"]
        assert ends[0]["failed"] == message


def test_a_rate_limit_is_retried_then_succeeds_and_a_refused_connection_is_one_line(tmp_path: Path) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(FAULTS["rate_limited"], FAULTS["ok"])
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        assert turn(rt, session, model(endpoint), "hello").text == "fine"
        assert len(endpoint.seen) == 2
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        closed = AnthropicModel(
            AnthropicConfig(base_url=f"http://127.0.0.1:{port}", max_retries=0), env={"ANTHROPIC_API_KEY": KEY}
        )
        with pytest.raises(ModelError, match=rf"^model provider anthropic at http://127.0.0.1:{port}: cannot connect"):
            turn(rt, session, closed, "hello")


def test_an_unknown_tool_goes_back_to_the_model_as_a_tool_error(tmp_path: Path) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        endpoint.queue(FAULTS["unknown_tool"], FAULTS["ok"])
        session = rt.ctx.require(SESSIONS).create(str(tmp_path))
        assert turn(rt, session, model(endpoint), "go").text == "fine"
    result = endpoint.seen[1].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_x" and result["is_error"] is True
    assert result["content"].startswith("no tool named 'teleport'; tools: ")


def test_the_entry_point_loads_with_the_sdk_environment_defaults_and_refuses_unknown_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Endpoint() as endpoint, runtime(tmp_path) as rt:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", endpoint.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        llm = load_model(rt, ModelChoice(provider="anthropic"))
        endpoint.queue(FAULTS["ok"])
        assert turn(rt, rt.ctx.require(SESSIONS).create(str(tmp_path)), llm, "hi").text == "fine"
        assert endpoint.seen[0].body["model"] == "claude-sonnet-4-5"
    with runtime(tmp_path) as rt, pytest.raises(BootError, match=r"field 'config.url' is not a known field"):
        load_model(rt, ModelChoice(provider="anthropic", config={"url": "x"}))


@pytest.mark.parametrize("offset", [0, 150, 285, 294, 299, 320])
def test_a_key_the_server_names_at_any_offset_reaches_no_line_record_or_hook_even_in_part(
    tmp_path: Path, offset: int
) -> None:
    hooked = tmp_path / "stop-failure.jsonl"
    record_hook(tmp_path / "home", "StopFailure", hooked)
    said = f"{'x' * offset}{KEY} is not a key this server knows; {'y' * 40}"
    refused = {"status": 400, "json": {"type": "error", "error": {"type": "invalid_request_error", "message": said}}}
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
