"""A turn driven from outside: an integrator's own loop calls dsh's tools, and dsh records and guards them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from dsh.paths.interrupts import interruption
from dsh.session import TOOLS, ToolResult, drop_nulls
from dsh.session.trace import current_trace

from ._errors import TurnError
from ._model import ToolCall

if TYPE_CHECKING:
    from dsh.session.trace import TraceContext

    from ._loop import Agent
    from ._observe import Span


class Turn:
    """One turn of an outside loop on ``agent``'s session: ``async with Turn(agent, prompt) as turn:``.

    Entering opens the turn as dsh's own loop does (the session's write lock, ``turn/start``, the
    prompt as ``message/user`` and ``UserPromptSubmit`` hooks); :meth:`call` runs a tool call with
    ``PreToolUse``/``PostToolUse`` hooks and records it; calls may overlap (``asyncio.gather``).
    Leaving fires ``Stop`` (unless :meth:`finish` did), waits for calls still running, records
    ``turn/end`` and flushes. On an exception the calls still running are cancelled (their
    process groups killed), the exception is recorded (an ``error`` event and ``failed`` on
    ``turn/end``, or ``interrupted`` for a cancellation) and the turn is flushed all the same.
    """

    def __init__(
        self, agent: Agent, prompt: str | None = None, *, source: str = "outside", trace: TraceContext | None = None
    ) -> None:
        self.agent = agent
        self._parent_trace = trace
        """The context the turn's ``invoke_agent`` span is a child of (default: the agent's run)."""
        self.trace: TraceContext | None = None
        """The turn's span, once entered: its calls' spans are its children (unless a call names its own parent)."""
        self._span: Span | None = None
        self.prompt = prompt
        self.source = source
        self.id: str | None = None
        """The turn's id (``<session>:turn-<n>``), once entered; what ``DSH_TURN_ID`` holds for its calls."""
        self.blocked: str | None = None
        """Why a ``UserPromptSubmit`` hook blocked the prompt (no call may run then), else None."""
        self._stopped: str | None = None
        self._finished = False
        self._closed = False
        self._stop_blocked = False
        self._tasks: set[asyncio.Future[ToolResult]] = set()

    @property
    def stopped(self) -> str | None:
        """Why a hook said the turn must stop (``continue: false``), else None: later calls are refused."""
        return self._stopped or self.agent._stopping

    async def __aenter__(self) -> Turn:
        agent = self.agent
        agent._stopping = None
        self.trace, self._span = agent._span_start("turn", "invoke_agent", self._parent_trace)
        try:
            self.id = agent._open_turn(source=self.source)
        except BaseException as exc:
            agent._span_end(self._span, exc)
            raise
        if self._span is not None:
            self._span.attributes["dsh.turn.id"] = self.id
        try:
            if self.prompt is not None:
                agent.session.record("message/user", text=self.prompt)
                hooks = agent._hooks()
                if hooks is not None and agent.parent is None:
                    with self._in_span():
                        said = await hooks.user_prompt(agent._scope(self.id), self.prompt)
                    outcome = agent._settle("UserPromptSubmit", said)
                    if outcome.stop:
                        self._stopped = self.blocked = outcome.stop_reason
                    elif outcome.blocked:
                        self.blocked = outcome.reason
        except BaseException as exc:
            await self._close(exc)
            raise
        return self

    @contextmanager
    def _in_span(self) -> Iterator[None]:
        """The turn's span as the one running (its hooks' ``TRACEPARENT``) for the block."""
        token = current_trace.set(self.trace)
        try:
            yield
        finally:
            current_trace.reset(token)

    def _check_open(self, what: str) -> str:
        if self.id is None or self._closed:
            state = "has not started" if self.id is None else "has ended"
            raise TurnError(f"{what}: the turn {state}; use it inside 'with session.turn(...)'", turn_id=self.id)
        if self.blocked is not None:
            raise TurnError(
                f"{what}: turn {self.id} was blocked by a UserPromptSubmit hook ({self.blocked}); start a new turn",
                turn_id=self.id,
            )
        if self.stopped is not None:
            raise TurnError(f"{what}: turn {self.id} was stopped by a hook ({self.stopped})", turn_id=self.id)
        return self.id

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        trace: TraceContext | None = None,
    ) -> ToolResult:
        """Run one call of tool ``name`` in this turn, as dsh's loop would, and return its result.

        ``call_id`` is the id the caller's model gave the call; one that breaks the rule of session
        ids is replaced (the ``tool/call`` event keeps it as ``supplied_call_id``). Nulls a strict-mode
        model sends for optional arguments are dropped (:func:`dsh.session.drop_nulls`). A tool's
        failure is a result with ``is_error`` set, never an exception. ``trace``: the context the
        call's ``execute_tool`` span is a child of when not the turn's (an MCP request's ``traceparent``).
        """
        turn_id = self._check_open(f"call of '{name}'")
        given = dict(arguments or {})
        tools = self.agent.ctx.get(TOOLS)
        tool = None if tools is None else tools.get(name)
        if tool is not None:
            given = drop_nulls(given, tool.spec.parameters)
        call = ToolCall(name=name, arguments=given, id=call_id)
        task = asyncio.ensure_future(self.agent.call_tool(call, turn_id, trace=trace or self.trace))
        self._tasks.add(task)
        try:
            return await task  # cancelling the awaiting caller cancels the call (its group is killed)
        finally:
            self._tasks.discard(task)

    async def finish(self, text: str | None = None) -> str | None:
        """Fire ``Stop`` (``SubagentStop`` for a subagent) with the model's last ``text``.

        Returns the reason when a Stop hook blocks (the agent should go on: the reason is recorded
        as the next ``message/user`` with ``source: "stop_hook"``; call more tools in this turn,
        then ``finish`` again), else None. Leaving the turn calls it when nobody did.
        """
        self._check_open("finish")
        self._finished = True
        agent = self.agent
        hooks = agent._hooks()
        if hooks is None:
            return None
        event = "Stop" if agent.parent is None else "SubagentStop"
        with self._in_span():
            said = await hooks.stop(
                agent._scope(self.id), stop_hook_active=self._stop_blocked, last_message=text or None
            )
        outcome = agent._settle(event, said)
        if outcome.stop:
            self._stopped = outcome.stop_reason
            return None
        if outcome.blocked:
            self._stop_blocked = True
            self._finished = False
            agent.session.record("message/user", text=outcome.reason, source="stop_hook")
            return outcome.reason
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._close(exc)

    async def _close(self, exc: BaseException | None) -> None:
        if self._closed:
            return
        agent, session = self.agent, self.agent.session
        extra: dict[str, Any] = {}
        try:
            if exc is not None:
                for task in self._tasks:
                    task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            if exc is None and not self._finished and self.blocked is None and self.stopped is None:
                await self.finish()
        except BaseException as late:
            exc = exc or late
            raise
        finally:
            self._closed = True
            if exc is not None:
                interrupted = interruption(exc)
                if interrupted is not None:
                    extra["interrupted"] = interrupted
                else:
                    extra["failed"] = f"{type(exc).__name__}: {exc}"
                    session.record("error", message=extra["failed"])
            if self.stopped is not None:
                extra["stopped"] = self.stopped
            try:
                agent._close_turn(self.id or "", self, blocked=self.blocked, **extra)
            finally:
                agent._span_end(self._span, exc)
