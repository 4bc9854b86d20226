"""The agent loop: turns, tool calls with hooks, and the turn-end flush."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from dsh.core import Context
from dsh.loader import LOOP_LIMITS, TURN_REFRESH, LoopLimits
from dsh.paths.interrupts import Interrupts, interruption, printed_before
from dsh.session import (
    TOOLS,
    AgentRef,
    PersistenceError,
    Session,
    Tool,
    ToolExecution,
    ToolResult,
    ToolSpec,
    is_safe_id,
)
from dsh.session.trace import TraceContext, current_trace, start_run

from ._errors import ModelError, TranscriptNotSaved
from ._hookpoints import HookPoints
from ._hookseam import HOOKS, ONE_CALL_POINTS, Notice
from ._model import Model, ToolCall
from ._observe import OBSERVERS, Span
from ._request import REQUEST_EVENT, request_data
from ._turns import recorded

if TYPE_CHECKING:
    from ._steps import TurnResult

current_agent: ContextVar[Agent | None] = ContextVar("dsh_current_agent", default=None)
"""The agent whose tool call is running (``spawn_agent`` spawns under it)."""


def _new_call_id() -> str:
    return f"call-{os.urandom(8).hex()}"


def _call_id(given: str | None) -> tuple[str, dict[str, str]]:
    """The id a call runs under, and what to record of the id it was given when that one was refused.

    A call id reaches the child as ``DSH_TOOL_CALL_ID`` and hooks as ``tool_use_id``, so it obeys the
    rule of session ids (:func:`dsh.session.is_safe_id`). An id a model or an outside loop supplies
    that breaks it is replaced by a fresh one, and the ``tool/call`` event keeps the given one as
    ``supplied_call_id``, so the call can still be matched to what the caller sent.
    """
    if given is None or given == "":
        return _new_call_id(), {}
    if is_safe_id(given):
        return given, {}
    return _new_call_id(), {"supplied_call_id": given}


def needs_event_loop(ctx: Context, tool: str) -> bool:
    """True when one agent call of ``tool`` may have to wait under asyncio.

    That is when a hook is configured for an event of that turn (hook commands run concurrently),
    or when the tool cannot run to its end without an event loop (a shell tool whose executor has
    no ``run_sync``). Otherwise the call's coroutine never suspends (an event without hooks returns
    at once) and a caller may drive it without an event loop (``dsh.paths.interrupts.run_blocking``,
    as ``dsh exec`` does), so a one-shot ``dsh exec`` imports no asyncio, even when the hooks plugin is
    loaded with nothing configured.
    """
    hooks = ctx.get(HOOKS)
    if hooks is not None and hooks.has_hooks(ONE_CALL_POINTS):
        return True
    tools = ctx.get(TOOLS)
    found = None if tools is None else tools.get(tool)
    return found is not None and not getattr(found, "can_run_sync", False)


class Agent(HookPoints):
    """One agent bound to one session: runs turns, calls tools, flushes at turn end.

    A subagent has a ``parent`` (the agent whose ``spawn_agent`` call started it, and that call's
    turn): it gets no ``UserPromptSubmit`` and, instead of ``Stop``, ``SubagentStop`` in the
    parent's name; every hook it fires carries its ``agent_id`` and ``agent_type``.

    Its methods are coroutines. Under asyncio, calls of one step overlap; without an event loop
    (see :func:`needs_event_loop`) a tool turn runs to its end in one ``send``, and a signal
    arrives as :class:`dsh.paths.interrupts.Interrupted` instead of ``asyncio.CancelledError``.
    """

    parent: Agent | None

    def __init__(
        self,
        ctx: Context,
        session: Session,
        model: Model,
        *,
        name: str = "main",
        agent_type: str = "main",
        max_steps: int | None = None,
        max_parallel_tools: int | None = None,
        parent: Agent | None = None,
        parent_turn_id: str | None = None,
        notify: Callable[[Notice], None] | None = None,
        ambient: Mapping[str, str] | None = None,
        trace: TraceContext | None = None,
    ) -> None:
        self.ctx = ctx
        self.session = session
        self.model = model
        self.name = name
        self.agent_type = agent_type
        # The limits: given here, else a subagent's parent's, else the deployment's (``loop`` in it).
        limits: LoopLimits = parent.limits if parent is not None else ctx.get(LOOP_LIMITS) or LoopLimits()
        self.limits: LoopLimits = LoopLimits(
            limits.max_steps if max_steps is None else max_steps,
            limits.max_parallel_tools if max_parallel_tools is None else max_parallel_tools,
        )
        """Model steps per turn, and tool calls of one answer at once (:class:`dsh.loader.LoopLimits`)."""
        self.parent = parent
        self.parent_turn_id = parent_turn_id
        self.notify = notify or (parent.notify if parent is not None else None)
        """Where hooks' ``systemMessage`` lines and hook failure warnings go (default: the log)."""
        self.ambient: Mapping[str, str] | None = ambient if ambient is not None or parent is None else parent.ambient
        """The environment its tool calls' children start from when not this process's (``ToolExecution.ambient``)."""
        self.ref = AgentRef(name=name, header=session.header, agent_type=agent_type)
        self._stopping: str | None = None
        self._trace = trace
        """The trace context of this agent's run: given (an embedder's, an MCP request's), else read
        from its ambient environment at the first need (see :meth:`trace_root`)."""

    def trace_root(self) -> TraceContext:
        """The context this agent's work is a child of: the span running now (a subagent's spawn
        call, a span an embedder set), else the run's, continued from the ``TRACEPARENT`` the agent
        was handed (its ambient environment's) or a new trace, chosen once per agent."""
        running = current_trace.get()
        if running is not None:
            return running
        if self._trace is None:
            self._trace = start_run(os.environ if self.ambient is None else self.ambient)
        return self._trace

    def _span_start(
        self, kind: str, name: str, parent: TraceContext | None = None, attributes: Mapping[str, Any] | None = None
    ) -> tuple[TraceContext, Span | None]:
        """A new span, a child of ``parent`` (default: the span running now, see :meth:`trace_root`),
        and its record when observers watch (they are told it started)."""
        parent = parent or self.trace_root()
        context = parent.child()
        observers = self.ctx.get(OBSERVERS)
        if observers is None or not observers.active:
            return context, None
        header = self.session.header
        fields = dict(attributes or {})
        fields.update(
            {
                "gen_ai.operation.name": name.split(" ", 1)[0],
                "gen_ai.conversation.id": header.id,
                "gen_ai.agent.id": header.id,
                "gen_ai.agent.name": self.name,
                "dsh.agent.type": self.agent_type,
                "dsh.agent.depth": header.delegation_depth,
            }
        )
        span = Span(kind, name, context, parent.span_id, fields)
        observers.start(span)
        return context, span

    def _span_end(self, span: Span | None, error: BaseException | None = None) -> None:
        """Tell the observers ``span`` ended (with why, when ``error``)."""
        observers = self.ctx.get(OBSERVERS)
        if span is not None and observers is not None:
            why = None if error is None else interruption(error) or f"{type(error).__name__}: {error}"
            observers.end(span, why)

    @contextmanager
    def _traced(
        self, kind: str, name: str, parent: TraceContext | None = None, attributes: Mapping[str, Any] | None = None
    ) -> Iterator[Span | None]:
        """Run the block as a span of its own (see :meth:`_span_start`): a process started inside
        gets it as its ``TRACEPARENT``."""
        context, span = self._span_start(kind, name, parent, attributes)
        token = current_trace.set(context)
        error: BaseException | None = None
        try:
            yield span
        except BaseException as exc:
            error = exc
            raise
        finally:
            current_trace.reset(token)
            self._span_end(span, error)

    def _tool_specs(self) -> list[ToolSpec]:
        tools = self.ctx.get(TOOLS)
        return [] if tools is None else tools.specs()

    async def start(self, source: str = "startup") -> str | None:
        """Fire SessionStart (``startup``, ``resume`` or ``fork``): why a hook stopped the run, else None.

        A stopped run should not go on (``continue: false``); the reason is the hooks' ``stopReason``.
        """
        hooks = self._hooks()
        if hooks is None:
            return None
        token = current_trace.set(self.trace_root().child())  # the hook processes' span
        try:
            outcome = self._settle(
                "SessionStart",
                await hooks.session_start(self.session.header, source, events=self._events, ambient=self.ambient),
            )
        finally:
            current_trace.reset(token)
        return outcome.stop_reason if outcome.stop else None

    async def end(self, reason: str = "other") -> None:
        """Fire SessionEnd once the session's run is over (async hooks still running are not waited for).

        What the hooks did is recorded in a short turn of its own (``source: "session-end"``), only
        when some hook ran, so the transcript stays a sequence of complete turns.
        """
        hooks = self._hooks()
        if hooks is None:
            return
        token = current_trace.set(self.trace_root().child())  # the hook processes' span
        try:
            outcome = await hooks.session_end(self.session.header, reason, events=self._events, ambient=self.ambient)
        finally:
            current_trace.reset(token)
        if not outcome.reports and not outcome.warnings:
            return
        turn_id = self._open_turn(source="session-end")
        try:
            self._settle("SessionEnd", outcome)
        finally:
            self.session.record("turn/end", turn_id=turn_id)
            self.session.flush()

    def _open_turn(self, **data: Any) -> str:
        # The lock comes first: nothing of the turn runs unless it can be recorded, and the turn
        # number is taken from the transcript as other writers left it.
        self.session.acquire()
        try:
            # Installed distributions are re-read at every turn start (unless the deployment says
            # refresh_per_turn: false); unchanged, that costs one stat per sys.path entry.
            refresh = self.ctx.get(TURN_REFRESH)
            if refresh is not None:
                refresh()
        except BaseException:
            self.session.release()
            raise
        turn_id = self.session.new_turn_id()
        self.session.record("turn/start", turn_id=turn_id, agent=self.name, **data)
        return turn_id

    def _close_turn(self, turn_id: str, result: object, **data: Any) -> None:
        """Record ``turn/end`` and flush (releasing the lock); a failed flush keeps the result."""
        self.session.record("turn/end", turn_id=turn_id, **data)
        try:
            with Interrupts.protected():  # a signal lets the flush finish (then stops dsh, if nothing ran)
                self.session.flush()
        except (PersistenceError, OSError) as exc:
            raise TranscriptNotSaved(self.session.id, exc, result) from exc

    async def run_turn(self, prompt: str) -> TurnResult:
        """Run one turn to its end and flush the transcript (the checkpoint), even on failure.

        The turn is an ``invoke_agent`` span of the run's trace (see :meth:`trace_root`)."""
        with self._traced("turn", "invoke_agent") as span:
            return await self._run_turn(prompt, span)

    async def _run_turn(self, prompt: str, span: Span | None) -> TurnResult:
        from ._steps import ModelStep, TurnResult  # only model-driven turns need them, never ``dsh exec``

        turn_id = self._open_turn()
        if span is not None:
            span.attributes["dsh.turn.id"] = turn_id
        result = TurnResult(turn_id)  # the turn's record so far, replaced as the turn goes on
        session = self.session
        hooks = self._hooks()
        self._stopping = None
        interrupted: str | None = None
        failed: str | None = None
        try:
            session.record("message/user", text=prompt)
            if hooks is not None and self.parent is None:
                outcome = self._settle("UserPromptSubmit", await hooks.user_prompt(self._scope(turn_id), prompt))
                if outcome.stop:
                    result = result._replace(stopped=outcome.stop_reason, blocked=outcome.stop_reason)
                    return result
                if outcome.blocked:
                    result = result._replace(blocked=outcome.reason)
                    return result
            self.model.begin_turn(prompt)
            stop_hook_active = False
            stop_blocks = 0
            offered: dict[str, Any] | None = None
            last_text = ""
            for _ in range(self.limits.max_steps):
                await self._background_hooks()
                specs = self._tool_specs()
                request = request_data(self.model.name, specs)
                if request != offered:  # once per turn, and again whenever the offer changes
                    session.record(REQUEST_EVENT, **request)
                    offered = request
                ended = None if hooks is None else await self._model_point(turn_id, None)
                if ended is not None:  # a BeforeModel hook blocked the request: the turn ends unasked
                    result = result._replace(blocked=ended)
                    break
                with self._traced("model", "chat", None, {"gen_ai.request.model": self.model.name}) as chat:
                    step = await self.model.step(session, specs)
                    if chat is not None and isinstance(step, ModelStep) and step.usage:
                        chat.attributes.update(_usage(step.usage))
                if not isinstance(step, ModelStep):
                    raise ModelError(
                        f"model '{self.model.name}' step() returned {type(step).__name__}, not a dsh.agent.ModelStep",
                        provider=self.model.name,
                    )
                calls = [c if c.id else c._replace(id=_new_call_id()) for c in step.tool_calls]
                answer = (step.text, [c.to_json() for c in calls])
                ended = None if hooks is None else await self._model_point(turn_id, answer)
                if ended is not None:  # an AfterModel hook refused the answer: dropped, the turn ends
                    result = result._replace(blocked=ended)
                    break
                said: dict[str, Any] = {}
                if step.reasoning:
                    said["reasoning"] = step.reasoning
                if step.usage:
                    said["usage"] = dict(step.usage)
                session.record(
                    "message/assistant",
                    text=step.text,
                    tool_calls=[c.to_json() for c in calls],
                    **said,
                )
                last_text = step.text
                if calls:
                    results = await self._call_tools(calls, turn_id)
                    result = result._replace(tool_results=(*result.tool_results, *zip(calls, results, strict=True)))
                    if hooks is not None:
                        await self._post_tool_batch(calls, results, turn_id)
                    if self._stopping is not None:
                        result = result._replace(stopped=self._stopping)
                        break
                    continue
                result = result._replace(text=step.text)
                if hooks is None:
                    break
                event = "Stop" if self.parent is None else "SubagentStop"
                stop = self._settle(
                    event,
                    await hooks.stop(
                        self._scope(turn_id), stop_hook_active=stop_hook_active, last_message=step.text or None
                    ),
                )
                if stop.stop:
                    result = result._replace(stopped=stop.stop_reason)
                    break
                if stop.blocked and not self._stop_capped(event, stop_blocks, stop.reason):
                    # A blocking Stop hook sends the agent on, with the reason as the next prompt;
                    # every time it blocks (up to the peer's cap), with stop_hook_active set after the first.
                    stop_hook_active = True
                    stop_blocks += 1
                    session.record("message/user", text=stop.reason, source="stop_hook")
                    continue
                break
            else:
                failed = self._step_cap()
                session.record("error", message=failed)
                result = result._replace(text=last_text, failed=failed)
                if hooks is not None:
                    result = await self._stop_at_cap(turn_id, last_text, result)
            return result
        except BaseException as exc:
            interrupted = interruption(exc)
            if interrupted is None and isinstance(exc, Exception):
                # A provider's fault is its own sentence; anything else keeps its type for the record.
                failed = str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}"
                session.record("error", message=failed)
                if hooks is not None:
                    await self._stop_failure(exc, turn_id)
            raise
        finally:
            extra: dict[str, Any] = {"interrupted": interrupted} if interrupted else {}
            if failed is not None or result.failed is not None:
                extra["failed"] = failed or result.failed
            self._close_turn(turn_id, result, blocked=result.blocked, **extra)

    def _step_cap(self) -> str:
        """Why a turn that used every step failed: the cap, its value and where to raise it."""
        cap = self.limits.max_steps
        return (
            f"the turn reached max_steps ({cap}): the model was still working after {cap} steps; "
            "raise loop.max_steps in the deployment (dsh run: --max-steps N)"
        )

    async def _stop_at_cap(self, turn_id: str, last_text: str, result: TurnResult) -> TurnResult:
        """The Stop (or SubagentStop) hooks of a turn ended by its step cap: they run, and cannot send it on."""
        hooks = self._hooks()
        assert hooks is not None
        event = "Stop" if self.parent is None else "SubagentStop"
        stop = self._settle(
            event, await hooks.stop(self._scope(turn_id), stop_hook_active=False, last_message=last_text or None)
        )
        if stop.stop:
            return result._replace(stopped=stop.stop_reason)
        if stop.blocked:
            self._warn(
                event,
                f"{event} hooks blocked the stop, but the turn reached max_steps; it ends. Reason given: {stop.reason}",
            )
        return result

    async def _call_tools(self, calls: list[ToolCall], turn_id: str) -> list[ToolResult]:
        """Run one answer's calls, at most ``max_parallel_tools`` at once; results in the model's order."""
        import asyncio  # the model-driven loop runs under asyncio: its calls overlap

        if len(calls) == 1:
            return [await self.call_tool(calls[0], turn_id)]
        slots = asyncio.Semaphore(self.limits.max_parallel_tools)

        async def bounded(call: ToolCall) -> ToolResult:
            async with slots:
                return await self.call_tool(call, turn_id)

        return list(await asyncio.gather(*(bounded(c) for c in calls)))

    async def run_tool_turn(self, call: ToolCall, source: str = "exec") -> ToolResult:
        """One turn made of a single tool call, as ``dsh exec`` runs it; flushed at its end.

        Raises :class:`TranscriptNotSaved` (carrying the tool's result) when the call ran but the
        flush failed. A cancelled turn (a signal) is flushed with ``turn/end`` marked interrupted.
        """
        with self._traced("turn", "invoke_agent") as span:
            return await self._run_tool_turn(call, source, span)

    async def _run_tool_turn(self, call: ToolCall, source: str, span: Span | None) -> ToolResult:
        turn_id = self._open_turn(source=source)
        if span is not None:
            span.attributes["dsh.turn.id"] = turn_id
        result: ToolResult | None = None
        interrupted: str | None = None
        try:
            result = await self.call_tool(call, turn_id)
            return result
        except BaseException as exc:
            interrupted = interruption(exc)
            raise
        finally:
            self._close_turn(turn_id, result, **({"interrupted": interrupted} if interrupted else {}))

    async def call_tool(
        self, call: ToolCall, turn_id: str | None = None, *, trace: TraceContext | None = None
    ) -> ToolResult:
        """Run one tool call as the model would: PreToolUse hooks, the tool, PostToolUse hooks, the record.

        The call is an ``execute_tool <name>`` span, a child of ``trace`` (default: the span running
        now): its hooks and the tool's child get it as ``TRACEPARENT``."""
        call_id, supplied = _call_id(call.id)
        attributes = {"gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call_id}
        with self._traced("tool", f"execute_tool {call.name}", trace, attributes) as span:
            result = await self._call_tool(call, turn_id, call_id, supplied)
            if span is not None:
                span.attributes.update(_outcome(result))
            return result

    async def _call_tool(
        self, call: ToolCall, turn_id: str | None, call_id: str, supplied: Mapping[str, str]
    ) -> ToolResult:
        self.session.record("tool/call", call_id=call_id, name=call.name, arguments=call.arguments, **supplied)
        tools = self.ctx.get(TOOLS)
        tool = None if tools is None else tools.get(call.name)
        hooks = self._hooks()
        if call.error is not None:
            result = ToolResult(call.error, is_error=True)  # the model's own fault: it is told, nothing runs
        elif tool is None:
            known = ", ".join(s.name for s in self._tool_specs()) or "none"
            result = ToolResult(f"no tool named '{call.name}'; tools: {known}", is_error=True)
        else:
            arguments, refusal = (
                (call.arguments, None) if hooks is None else await self._pre_tool(call, call_id, turn_id)
            )
            if refusal is not None:
                result = refusal
            else:
                result = await self._run_tool(tool, call, call_id, arguments, turn_id)
                if hooks is not None:
                    result = await self._post_tool(call, call_id, arguments, turn_id, result)
        self.session.record(
            "tool/result",
            call_id=call_id,
            name=call.name,
            output=result.output,
            is_error=result.is_error,
            data=recorded(result),
        )
        return result

    async def _run_tool(
        self, tool: Tool, call: ToolCall, call_id: str, arguments: Mapping[str, Any], turn_id: str | None
    ) -> ToolResult:
        hooks = self._hooks()
        env = {} if hooks is None else hooks.session_env(self.session.header)
        execution = ToolExecution(
            tool=call.name,
            call_id=call_id,
            arguments=arguments,
            agent=self.ref,
            turn_id=turn_id,
            env=env,
            ambient=self.ambient,
            trace=current_trace.get(),
        )
        try:
            # The write-ahead record: durable before the command starts, so a kill leaves that it began.
            self.session.begin(call_id, name=call.name, arguments=dict(arguments), turn_id=turn_id)
        except (PersistenceError, OSError) as exc:
            return ToolResult(f"tool '{call.name}' did not run: its start could not be recorded: {exc}", is_error=True)
        token = current_agent.set(self)
        try:
            return await tool(arguments, execution)
        except Exception as exc:
            return ToolResult(f"tool '{call.name}' failed: {type(exc).__name__}: {exc}", is_error=True)
        except BaseException as exc:
            reason = interruption(exc)
            if reason is not None:
                # Interrupted (a signal): the record says whether a command had started (the executor
                # then killed its process group) or the signal came before it did.
                what = (
                    "no command had started"
                    if Interrupts.before_command()
                    else "the command's process group was killed"
                )
                output, data = f"interrupted ({reason}): {what}", {"interrupted": reason}
                printed = printed_before(exc)
                if printed is not None:  # what the command printed until then is kept, as for a timeout
                    output += "".join(f"\n{text.rstrip()}" for text in (printed.stdout, printed.stderr) if text)
                    data = {**printed.as_data(), **data}
                self.session.record(
                    "tool/result", call_id=call_id, name=call.name, output=output, is_error=True, data=data
                )
            raise
        finally:
            current_agent.reset(token)


def _usage(usage: Mapping[str, Any]) -> dict[str, int]:
    """A model step's token counts as GenAI attributes (the names providers use for them)."""
    names = {
        "input_tokens": "gen_ai.usage.input_tokens",
        "prompt_tokens": "gen_ai.usage.input_tokens",
        "output_tokens": "gen_ai.usage.output_tokens",
        "completion_tokens": "gen_ai.usage.output_tokens",
    }
    return {names[k]: v for k, v in usage.items() if k in names and isinstance(v, int)}


def _outcome(result: ToolResult) -> dict[str, Any]:
    """What an ``execute_tool`` span says of a call's end: the command's exit status, a timeout, an error."""
    out: dict[str, Any] = {}
    value = result.value
    code = getattr(value, "exit_code", None)
    if isinstance(code, int):
        out["process.exit.code"] = code
    if getattr(value, "timed_out", False):
        out["dsh.timed_out"] = True
    if result.is_error:
        out["error.type"] = "blocked" if result.blocked else "tool_error"
    return out
