"""The agent loop with only dsh-agent's own dependencies: a kernel, the built-ins, a store in memory and
tools written here (no shell, no persistence backend, no hooks configured).

The integration suite drives the same loop with real bash and real backends; these pin what the
loop itself owns: the order of its records, call ids, tool faults, concurrency, outside turns and
the model seam's checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from dsh.agent import (
    BUILTINS,
    OBSERVERS,
    Agent,
    ModelError,
    ModelStep,
    ScriptedModel,
    Span,
    ToolCall,
    check_model,
)
from dsh.agent.outside import Turn
from dsh.core import Context, Plugin
from dsh.loader import root
from dsh.session import (
    SESSIONS,
    TOOLS,
    PersistenceError,
    Session,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    SessionNotFoundError,
    ToolExecution,
    ToolResult,
    ToolSpec,
)
from dsh.session.events import event_problems
from dsh.session.persistence import SESSION_PERSISTENCE, StoredSession
from dsh.session.trace import TRACEPARENT, TraceContext


class _Memory:
    """A session store in memory: every flush kept in order, no lock beyond the process."""

    def __init__(self) -> None:
        self.headers: dict[str, SessionHeader] = {}
        self.events: dict[str, list[SessionEvent]] = {}

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        return None

    def acquire(self, header: SessionHeader) -> Callable[[], None]:
        return lambda: None

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        self.headers.setdefault(header.id, header)
        self.events.setdefault(header.id, []).extend(events)

    def load(self, session_id: str) -> StoredSession:
        if session_id not in self.headers:
            raise SessionNotFoundError(f"no session {session_id}", session_id=session_id)
        return StoredSession(self.headers[session_id], tuple(self.events[session_id]))

    def list(self) -> list[SessionHeader]:
        return list(self.headers.values())

    def close(self) -> None:
        pass


class _Echo:
    """A tool answering with its arguments and the caller's ids; ``fail`` raises, ``wait`` sleeps."""

    spec = ToolSpec(
        name="echo",
        description="say it back",
        parameters={"type": "object", "properties": {"text": {"type": "string"}, "wait": {"type": "number"}}},
    )

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        if arguments.get("text") == "fail":
            raise RuntimeError("the echo broke")
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(float(arguments.get("wait", 0)))
        finally:
            self.running -= 1
        assert execution.session is not None
        said = f"{arguments.get('text')} {execution.call_id} {execution.session.id}"
        return ToolResult(said, data={"text": arguments.get("text")})


@pytest.fixture
def world() -> Iterator[tuple[Context, _Memory, _Echo]]:
    memory, echo = _Memory(), _Echo()
    ctx = root()
    ctx.plugin(Plugin(name="memory", apply=lambda c, _: c.provide(SESSION_PERSISTENCE, memory)))
    for plugin in BUILTINS:
        ctx.plugin(plugin)
    ctx.require(TOOLS).register(echo)
    yield ctx, memory, echo
    ctx.fiber.dispose()


def _session(ctx: Context) -> Session:
    return ctx.require(SESSIONS).create("/work")


def _echo(text: str, call_id: str | None = None, **more: Any) -> ToolCall:
    return ToolCall(name="echo", arguments={"text": text, **more}, id=call_id)


def test_a_turn_records_in_order_and_every_record_is_in_the_event_table(world: Any) -> None:
    ctx, memory, _ = world
    session = _session(ctx)
    model = ScriptedModel([[ModelStep(text="calling", tool_calls=[_echo("hi", "c1")]), ModelStep(text="done")]])
    result = asyncio.run(Agent(ctx, session, model).run_turn("go"))
    assert result.text == "done"
    assert result.tool_results[0][1].output == f"hi c1 {session.id}"
    stored = memory.events[session.id]
    assert [e.type for e in stored] == [
        "turn/start",
        "message/user",
        "model/request",
        "message/assistant",
        "tool/call",
        "tool/result",
        "message/assistant",
        "turn/end",
    ]
    assert [p for e in stored for p in event_problems(e.type, e.data, strict=True)] == []
    assert stored[0].data["turn_id"] == stored[-1].data["turn_id"] == f"{session.id}:turn-1"


def test_unsafe_or_missing_call_ids_are_replaced_and_the_given_one_kept(world: Any) -> None:
    ctx, memory, _ = world
    session = _session(ctx)
    steps = [ModelStep(tool_calls=[_echo("a", "bad id with spaces"), _echo("b")]), ModelStep(text="ok")]
    result = asyncio.run(Agent(ctx, session, ScriptedModel([steps])).run_turn("go"))
    calls = [e.data for e in memory.events[session.id] if e.type == "tool/call"]
    assert calls[0]["supplied_call_id"] == "bad id with spaces"
    assert all(" " not in c["call_id"] and c["call_id"] for c in calls)
    assert "supplied_call_id" not in calls[1]
    # The tool ran under the id recorded for it.
    assert result.tool_results[0][1].output.split()[1] == calls[0]["call_id"]


def test_tool_faults_are_results_not_crashes(world: Any) -> None:
    ctx, _, _ = world
    steps = [
        ModelStep(
            tool_calls=[
                _echo("fail"),
                ToolCall(name="nope", arguments={}),
                ToolCall(name="echo", arguments={}, error="arguments were not JSON"),
            ]
        ),
        ModelStep(text="recovered"),
    ]
    result = asyncio.run(Agent(ctx, _session(ctx), ScriptedModel([steps])).run_turn("go"))
    broke, unknown, malformed = (r for _, r in result.tool_results)
    assert broke.is_error and broke.output == "tool 'echo' failed: RuntimeError: the echo broke"
    assert unknown.is_error and unknown.output.startswith("no tool named 'nope'; tools: ") and "echo" in unknown.output
    assert malformed.is_error and malformed.output == "arguments were not JSON"
    assert result.text == "recovered"


def test_the_calls_of_one_step_overlap(world: Any) -> None:
    ctx, _, echo = world
    steps = [ModelStep(tool_calls=[_echo(str(n), wait=0.2) for n in range(4)]), ModelStep(text="all")]
    asyncio.run(Agent(ctx, _session(ctx), ScriptedModel([steps])).run_turn("go"))
    assert echo.most == 4


def test_a_failing_model_records_the_turn_failed_and_the_session_goes_on(world: Any) -> None:
    ctx, memory, _ = world
    session = _session(ctx)

    class Broken(ScriptedModel):
        async def step(self, session: Session, tools: Sequence[ToolSpec]) -> ModelStep:
            raise ModelError("provider 'x' at http://x: the server answered 503", provider="x")

    with pytest.raises(ModelError):
        asyncio.run(Agent(ctx, session, Broken([])).run_turn("one"))
    again = asyncio.run(Agent(ctx, session, ScriptedModel([[ModelStep(text="fine")]])).run_turn("two"))
    assert again.text == "fine"
    ends = [e.data for e in memory.events[session.id] if e.type == "turn/end"]
    assert ends[0]["failed"] == "provider 'x' at http://x: the server answered 503"
    assert "failed" not in ends[1]
    errors = [e.data["message"] for e in memory.events[session.id] if e.type == "error"]
    assert errors == [ends[0]["failed"]]


def test_a_step_that_is_not_a_model_step_is_named(world: Any) -> None:
    ctx, _, _ = world

    class Wrong(ScriptedModel):
        async def step(self, session: Session, tools: Sequence[ToolSpec]) -> ModelStep:
            return "text"  # type: ignore[return-value]

    with pytest.raises(ModelError, match=r"step\(\) returned str, not a dsh.agent.ModelStep"):
        asyncio.run(Agent(ctx, _session(ctx), Wrong([])).run_turn("go"))


def test_an_outside_turn_runs_concurrent_calls_and_records_a_failure(world: Any) -> None:
    ctx, memory, echo = world
    session = _session(ctx)
    agent = Agent(ctx, session, ScriptedModel([]))

    async def outside() -> list[ToolResult]:
        async with Turn(agent, "by hand") as turn:
            return list(await asyncio.gather(*(turn.call("echo", {"text": str(n), "wait": 0.2}) for n in range(3))))

    results = asyncio.run(outside())
    assert [r.output.split()[0] for r in results] == ["0", "1", "2"] and echo.most == 3

    async def failing() -> None:
        async with Turn(agent) as turn:
            await turn.call("echo", {"text": "x"})
            raise LookupError("the caller's loop broke")

    with pytest.raises(LookupError):
        asyncio.run(failing())
    ends = [e.data for e in memory.events[session.id] if e.type == "turn/end"]
    assert "failed" not in ends[0] and ends[1]["failed"] == "LookupError: the caller's loop broke"
    starts = [e.data for e in memory.events[session.id] if e.type == "turn/start"]
    assert [s["source"] for s in starts] == ["outside", "outside"]


def test_check_model_names_every_missing_member() -> None:
    class Sync:
        name = "sync"

        def begin_turn(self, prompt: str) -> None:
            pass

        def step(self, session: Session, tools: Sequence[ToolSpec]) -> ModelStep:
            return ModelStep(text="x")

    with pytest.raises(ModelError) as caught:
        check_model(Sync(), "model provider 'mine' (dsh-mine 1.0)")
    assert str(caught.value) == (
        "model provider 'mine' (dsh-mine 1.0) produced Sync, which is not a dsh Model: it has no method "
        "subagent(); its step() is not a coroutine function (declare it `async def step`) (see dsh.agent.Model)"
    )
    assert check_model(ScriptedModel([]), "scripted") is not None


def test_a_turn_at_its_step_cap_fails_with_the_reason_in_turn_end(world: Any) -> None:
    ctx, memory, _ = world
    session = _session(ctx)
    steps = [ModelStep(text=f"step {n}", tool_calls=[_echo(str(n))]) for n in range(5)]
    result = asyncio.run(Agent(ctx, session, ScriptedModel([steps]), max_steps=2).run_turn("go"))
    assert result.failed is not None and result.failed.startswith("the turn reached max_steps (2)")
    assert result.text == "step 1" and len(result.tool_results) == 2
    (end,) = [e.data for e in memory.events[session.id] if e.type == "turn/end"]
    assert end["failed"] == result.failed
    assert [e.data["message"] for e in memory.events[session.id] if e.type == "error"] == [result.failed]


def test_the_calls_of_one_answer_run_at_most_max_parallel_tools_at_once_all_in_order(world: Any) -> None:
    ctx, _, echo = world
    steps = [ModelStep(tool_calls=[_echo(str(n), wait=0.01) for n in range(40)]), ModelStep(text="all")]
    result = asyncio.run(Agent(ctx, _session(ctx), ScriptedModel([steps]), max_parallel_tools=3).run_turn("go"))
    assert echo.most == 3
    assert [r.output.split()[0] for _, r in result.tool_results] == [str(n) for n in range(40)]


def test_the_limits_come_from_the_deployment_and_a_subagent_keeps_its_parents() -> None:
    from dsh.loader import LOOP_LIMITS, LoopLimits

    ctx = root()
    for plugin in BUILTINS:
        ctx.plugin(plugin)
    ctx.provide(LOOP_LIMITS, LoopLimits(max_steps=7, max_parallel_tools=2))
    session = ctx.require(SESSIONS).create("/work")
    parent = Agent(ctx, session, ScriptedModel([]), max_steps=3)
    assert parent.limits == LoopLimits(3, 2)
    assert Agent(ctx, session, ScriptedModel([]), parent=parent).limits == LoopLimits(3, 2)
    assert Agent(ctx, session, ScriptedModel([])).limits == LoopLimits(7, 2)
    ctx.fiber.dispose()


class _Ahead(_Memory):
    """A store that keeps write-ahead records (``begin``), or refuses them when ``refuse`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.began: list[SessionEvent] = []
        self.refuse = False

    def begin(self, header: SessionHeader, event: SessionEvent) -> None:
        if self.refuse:
            raise PersistenceError("the store is full")
        self.began.append(event)


def _ahead_world() -> tuple[Context, _Ahead, list[list[str]]]:
    memory, seen = _Ahead(), []

    class _Look(_Echo):
        async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
            seen.append([str(e.data["call_id"]) for e in memory.began])  # what was durable when it ran
            return await super().__call__(arguments, execution)

    ctx = root()
    ctx.plugin(Plugin(name="memory", apply=lambda c, _: c.provide(SESSION_PERSISTENCE, memory)))
    for plugin in BUILTINS:
        ctx.plugin(plugin)
    ctx.require(TOOLS).register(_Look())
    return ctx, memory, seen


def test_each_call_is_recorded_as_begun_before_its_tool_runs() -> None:
    ctx, memory, seen = _ahead_world()
    session = _session(ctx)
    model = ScriptedModel([[ModelStep(tool_calls=[_echo("a", "c1"), _echo("b", "c2")]), ModelStep(text="done")]])
    result = asyncio.run(Agent(ctx, session, model, max_parallel_tools=1).run_turn("go"))
    assert result.text == "done"
    assert seen == [["c1"], ["c1", "c2"]]
    turn_id = f"{session.id}:turn-1"
    assert [e.data for e in memory.began] == [
        {"call_id": "c1", "name": "echo", "arguments": {"text": "a"}, "turn_id": turn_id},
        {"call_id": "c2", "name": "echo", "arguments": {"text": "b"}, "turn_id": turn_id},
    ]
    ctx.fiber.dispose()


def test_a_call_whose_start_cannot_be_recorded_does_not_run() -> None:
    ctx, memory, seen = _ahead_world()
    memory.refuse = True
    model = ScriptedModel([[ModelStep(tool_calls=[_echo("a", "c1")]), ModelStep(text="done")]])
    result = asyncio.run(Agent(ctx, _session(ctx), model).run_turn("go"))
    ((_, answer),) = result.tool_results
    assert seen == [] and answer.is_error
    assert answer.output == "tool 'echo' did not run: its start could not be recorded: the store is full"
    ctx.fiber.dispose()


def test_a_command_of_a_killed_run_is_told_to_the_model_on_resume() -> None:
    from dsh.agent import Said, conversation, unknown_outcome

    began = {"call_id": "c9", "name": "bash", "arguments": {"command": "rm -rf build"}, "turn_id": "s:turn-1"}
    items = conversation(
        [SessionEvent(type="tool/began", data=began), SessionEvent(type="message/user", data={"text": "hi"})]
    )
    assert items == [Said(unknown_outcome(began), "dsh"), Said("hi", None)]
    told = items[0].text
    assert "outcome is unknown" in told and "rm -rf build" in told and "c9" in told


def test_a_subagent_at_its_step_cap_is_a_failed_call_for_its_parent(world: Any) -> None:
    ctx, _, _ = world
    spawn = ToolCall(name="spawn_agent", arguments={"agent_type": "helper", "prompt": "look"})
    model = ScriptedModel(
        [[ModelStep(tool_calls=[spawn]), ModelStep(text="parent done")]],
        {"helper": [ModelStep(text=f"child {n}", tool_calls=[_echo(str(n))]) for n in range(5)]},
    )
    result = asyncio.run(Agent(ctx, _session(ctx), model, max_steps=2).run_turn("go"))
    assert result.failed is None and result.text == "parent done"
    ((_, answer),) = result.tool_results
    assert answer.is_error
    assert answer.output.startswith("the subagent's turn failed: the turn reached max_steps (2)")
    assert answer.output.endswith("\nchild 1")


# The observer seam: the spans of a turn, its model requests and its tool calls, with the ids the
# calls were handed; an observer is an effect of its plugin's fiber; a faulty one never fails work.


class _Carrier:
    """A tool answering with the trace context its child would get."""

    spec = ToolSpec(name="carrier", description="the call's span", parameters={"type": "object", "properties": {}})

    async def __call__(self, arguments: Any, execution: ToolExecution) -> ToolResult:
        assert execution.trace is not None
        return ToolResult(execution.trace.carrier()[TRACEPARENT])


class _Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.seen: list[tuple[str, Span]] = []

    def started(self, span: Span) -> None:
        self.seen.append(("start", span))
        if self.fail:
            raise RuntimeError("the observer broke")

    def ended(self, span: Span) -> None:
        self.seen.append(("end", span))
        if self.fail:
            raise RuntimeError("the observer broke")


def _observe(ctx: Context, recorder: _Recorder) -> Any:
    return ctx.plugin(Plugin(name="watch", apply=lambda c, _: c.require(OBSERVERS).register(recorder)))


def test_a_turn_is_told_as_spans_whose_ids_are_the_ones_the_children_got(world: Any) -> None:
    ctx = world[0]
    ctx.require(TOOLS).register(_Carrier())
    recorder = _Recorder()
    _observe(ctx, recorder)
    session = ctx.require(SESSIONS).create("/work")
    handed = TraceContext("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    steps = [ModelStep(tool_calls=[ToolCall(name="carrier", arguments={}, id="c1")]), ModelStep(text="done")]
    result = asyncio.run(Agent(ctx, session, ScriptedModel([steps]), trace=handed).run_turn("go"))
    ended = [span for what, span in recorder.seen if what == "end"]
    assert [s.name for s in ended] == ["chat", "execute_tool carrier", "chat", "invoke_agent"]
    chat, tool, _, turn = ended
    assert turn.parent_id == handed.span_id and turn.context.trace_id == handed.trace_id
    assert chat.parent_id == tool.parent_id == turn.context.span_id
    assert result.tool_results[0][1].output == f"00-{handed.trace_id}-{tool.context.span_id}-01"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1" and tool.attributes["gen_ai.tool.name"] == "carrier"
    assert turn.attributes["gen_ai.conversation.id"] == session.id == turn.attributes["gen_ai.agent.id"]
    assert all(s.end_ns is not None and s.end_ns >= s.start_ns and s.error is None for s in ended)


def test_unloading_the_observer_plugin_removes_it_and_a_faulty_one_fails_nothing(world: Any) -> None:
    ctx = world[0]
    ctx.require(TOOLS).register(_Carrier())
    faulty = _Recorder(fail=True)
    fiber = _observe(ctx, faulty)
    session = ctx.require(SESSIONS).create("/work")
    steps = [ModelStep(tool_calls=[ToolCall(name="carrier", arguments={})]), ModelStep(text="done")]
    assert asyncio.run(Agent(ctx, session, ScriptedModel([steps])).run_turn("go")).text == "done"
    assert len(faulty.seen) == 8
    fiber.dispose()
    assert ctx.require(OBSERVERS).active == ()
    steps = [ModelStep(text="again")]
    asyncio.run(Agent(ctx, session, ScriptedModel([steps])).run_turn("go"))
    assert len(faulty.seen) == 8
