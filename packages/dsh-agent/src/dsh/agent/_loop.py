"""The agent loop: turns, tool calls with hooks, the turn-end flush, and subagents."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dsh.core import Context, DshError, Plugin
from dsh.hooks import HOOKS
from dsh.loader import CATALOG
from dsh.session import SESSIONS, TOOLS, AgentRef, PersistenceError, Session, ToolExecution, ToolResult, ToolSpec

from ._model import Model, ToolCall
from ._request import REQUEST_EVENT, request_data

if TYPE_CHECKING:
    from dsh.hooks import HookOutcome, HookRunner, HookScope, Notice


log = logging.getLogger("dsh.agent")

_current_agent: ContextVar[Agent | None] = ContextVar("dsh_current_agent", default=None)


def _new_call_id() -> str:
    return f"call-{uuid.uuid4().hex[:16]}"


class TranscriptNotSaved(DshError):
    """A turn ran to its end but its flush failed; ``result`` keeps what the turn produced."""

    def __init__(self, session_id: str, cause: BaseException, result: object) -> None:
        super().__init__(f"the transcript of session {session_id} could not be saved: {cause}")
        self.session_id = session_id
        self.cause = cause
        self.result = result


def _interruption(exc: BaseException) -> str:
    """What a cancellation says about why (the signal name when ``dsh`` was interrupted)."""
    return str(exc.args[0]) if exc.args and exc.args[0] else "cancelled"


@dataclass
class TurnResult:
    """What one turn produced."""

    turn_id: str
    text: str = ""
    tool_results: list[tuple[ToolCall, ToolResult]] = field(default_factory=list)
    blocked: str | None = None
    """Why a UserPromptSubmit hook blocked the turn, if it did."""
    stopped: str | None = None
    """Why a hook ended the turn early (``continue: false`` and its ``stopReason``), if one did."""


class Agent:
    """One agent bound to one session: runs turns, calls tools, flushes at turn end.

    A subagent has a ``parent`` (the agent whose ``spawn_agent`` call started it, and that call's
    turn): it gets no ``UserPromptSubmit`` and, instead of ``Stop``, ``SubagentStop`` in the
    parent's name; every hook it fires carries its ``agent_id`` and ``agent_type``.
    """

    def __init__(
        self,
        ctx: Context,
        session: Session,
        model: Model,
        *,
        name: str = "main",
        agent_type: str = "main",
        max_steps: int = 64,
        parent: Agent | None = None,
        parent_turn_id: str | None = None,
        notify: Callable[[Notice], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.session = session
        self.model = model
        self.name = name
        self.agent_type = agent_type
        self.max_steps = max_steps
        self.parent = parent
        self.parent_turn_id = parent_turn_id
        self.notify: Callable[[Notice], None] | None = notify or (parent.notify if parent is not None else None)
        """Where hooks' ``systemMessage`` lines and hook failure warnings go (default: the log)."""
        self.ref = AgentRef(name=name, header=session.header, agent_type=agent_type)
        self._stopping: str | None = None

    def _tool_specs(self) -> list[ToolSpec]:
        tools = self.ctx.get(TOOLS)
        return [] if tools is None else tools.specs()

    # -- hooks: the runner decides, the loop records and acts ----------------------------------

    def _hooks(self) -> HookRunner | None:
        return self.ctx.get(HOOKS)

    def _scope(self, turn_id: str | None) -> HookScope:
        from dsh.hooks import HookScope

        if self.parent is None:
            return HookScope(self.session.header, turn_id)
        parent = self.parent._scope(self.parent_turn_id)
        return HookScope(self.session.header, turn_id, self.session.id, self.agent_type, parent)

    def _settle(self, event: str, outcome: HookOutcome, context_for: Session | None = None) -> HookOutcome:
        """Record what the hooks of ``event`` did, hand their context to the model, tell the user.

        Context goes to ``context_for`` (default this agent's session): SubagentStart's is the subagent's.
        """
        if not outcome.reports and not outcome.warnings:
            return outcome
        data: dict[str, Any] = {"event": event, "reports": [r.as_data() for r in outcome.reports]}
        if outcome.warnings:
            data["warnings"] = list(outcome.warnings)
        self.session.record("hook/result", **data)
        # Context is part of the conversation: the next model request is built from these events.
        for text in outcome.context:
            (context_for or self.session).record("message/context", text=text, source="hook", event=event)
        for notice in outcome.notices():
            if self.notify is not None:
                self.notify(notice)
            else:
                log.warning("%s", notice.text)
        return outcome

    async def _background_hooks(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            self._settle("async", await hooks.background())

    async def start(self, source: str = "startup") -> str | None:
        """Fire SessionStart (``startup``, ``resume`` or ``fork``): why a hook stopped the run, else None.

        A stopped run should not go on (``continue: false``); the reason is the hooks' ``stopReason``.
        """
        hooks = self._hooks()
        if hooks is None:
            return None
        outcome = self._settle("SessionStart", await hooks.session_start(self.session.header, source))
        return outcome.stop_reason if outcome.stop else None

    async def end(self, reason: str = "other") -> None:
        """Fire SessionEnd once the session's run is over (background hooks are waited for first).

        What the hooks did is recorded in a short turn of its own (``source: "session-end"``), only
        when some hook ran, so the transcript stays a sequence of complete turns.
        """
        hooks = self._hooks()
        if hooks is None:
            return
        outcome = await hooks.session_end(self.session.header, reason)
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
            # Installed distributions are re-read at every turn start; unchanged, that costs a few stats.
            catalog = self.ctx.get(CATALOG)
            if catalog is not None:
                catalog.refresh()
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
            self.session.flush()
        except (PersistenceError, OSError) as exc:
            raise TranscriptNotSaved(self.session.id, exc, result) from exc

    async def run_turn(self, prompt: str) -> TurnResult:
        """Run one turn to its end and flush the transcript (the checkpoint), even on failure."""
        turn_id = self._open_turn()
        result = TurnResult(turn_id)
        session = self.session
        hooks = self._hooks()
        self._stopping = None
        interrupted: str | None = None
        try:
            session.record("message/user", text=prompt)
            if hooks is not None and self.parent is None:
                outcome = self._settle("UserPromptSubmit", await hooks.user_prompt(self._scope(turn_id), prompt))
                if outcome.stop:
                    result.stopped = result.blocked = outcome.stop_reason
                    return result
                if outcome.blocked:
                    result.blocked = outcome.reason
                    return result
            self.model.begin_turn(prompt)
            stop_hook_active = False
            offered: dict[str, Any] | None = None
            for _ in range(self.max_steps):
                await self._background_hooks()
                specs = self._tool_specs()
                request = request_data(self.model.name, specs)
                if request != offered:  # once per turn, and again whenever the offer changes
                    session.record(REQUEST_EVENT, **request)
                    offered = request
                step = await self.model.step(session, specs)
                calls = [c if c.id else c.model_copy(update={"id": _new_call_id()}) for c in step.tool_calls]
                session.record(
                    "message/assistant",
                    text=step.text,
                    tool_calls=[c.model_dump() for c in calls],
                )
                if calls:
                    results = await asyncio.gather(*(self.call_tool(c, turn_id) for c in calls))
                    result.tool_results.extend(zip(calls, results, strict=True))
                    if self._stopping is not None:
                        result.stopped = self._stopping
                        break
                    continue
                result.text = step.text
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
                    result.stopped = stop.stop_reason
                    break
                if stop.blocked:
                    # A blocking Stop hook sends the agent on, with the reason as the next prompt;
                    # every time it blocks, and with stop_hook_active set after the first.
                    stop_hook_active = True
                    session.record("message/user", text=stop.reason, source="stop_hook")
                    continue
                break
            return result
        except asyncio.CancelledError as exc:
            interrupted = _interruption(exc)
            raise
        except Exception as exc:
            session.record("error", message=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            extra = {"interrupted": interrupted} if interrupted else {}
            self._close_turn(turn_id, result, blocked=result.blocked, **extra)

    async def run_tool_turn(self, call: ToolCall, source: str = "exec") -> ToolResult:
        """One turn made of a single tool call, as ``dsh exec`` runs it; flushed at its end.

        Raises :class:`TranscriptNotSaved` (carrying the tool's result) when the call ran but the
        flush failed. A cancelled turn (a signal) is flushed with ``turn/end`` marked interrupted.
        """
        turn_id = self._open_turn(source=source)
        result: ToolResult | None = None
        interrupted: str | None = None
        try:
            result = await self.call_tool(call, turn_id)
            return result
        except asyncio.CancelledError as exc:
            interrupted = _interruption(exc)
            raise
        finally:
            self._close_turn(turn_id, result, **({"interrupted": interrupted} if interrupted else {}))

    async def call_tool(self, call: ToolCall, turn_id: str | None = None) -> ToolResult:
        """Run one tool call as the model would: PreToolUse hooks, the tool, PostToolUse hooks, the record."""
        call_id = call.id or _new_call_id()
        self.session.record("tool/call", call_id=call_id, name=call.name, arguments=call.arguments)
        tools = self.ctx.get(TOOLS)
        tool = None if tools is None else tools.get(call.name)
        hooks = self._hooks()
        arguments: Mapping[str, Any] = call.arguments
        if tool is None:
            known = ", ".join(s.name for s in self._tool_specs()) or "none"
            result = ToolResult(f"no tool named '{call.name}'; tools: {known}", is_error=True)
        else:
            refusal: ToolResult | None = None
            if hooks is not None:
                scope = self._scope(turn_id)
                pre = self._settle("PreToolUse", await hooks.pre_tool(scope, call.name, arguments, call_id))
                if pre.stop:
                    self._stopping = pre.stop_reason
                    refusal = ToolResult(
                        f"stopped by a PreToolUse hook: {pre.stop_reason}", is_error=True, blocked=True
                    )
                elif pre.blocked:
                    refusal = ToolResult(f"blocked by a PreToolUse hook: {pre.reason}", is_error=True, blocked=True)
                elif pre.updated_input is not None:
                    arguments = dict(pre.updated_input)
                    self.session.record(
                        "tool/input_updated",
                        call_id=call_id,
                        name=call.name,
                        original=call.arguments,
                        arguments=arguments,
                    )
            if refusal is not None:
                result = refusal
            else:
                env = {} if hooks is None else hooks.session_env(self.session.header)
                execution = ToolExecution(
                    tool=call.name, call_id=call_id, arguments=arguments, agent=self.ref, turn_id=turn_id, env=env
                )
                token = _current_agent.set(self)
                try:
                    result = await tool(arguments, execution)
                except asyncio.CancelledError as exc:
                    # Interrupted (a signal): the executor has killed the process group; say so in the record.
                    self.session.record(
                        "tool/result",
                        call_id=call_id,
                        name=call.name,
                        output=f"interrupted ({_interruption(exc)}): the command's process group was killed",
                        is_error=True,
                        data={"interrupted": _interruption(exc)},
                    )
                    raise
                except Exception as exc:
                    result = ToolResult(f"tool '{call.name}' failed: {type(exc).__name__}: {exc}", is_error=True)
                finally:
                    _current_agent.reset(token)
                if hooks is not None:
                    response = {"output": result.output, "is_error": result.is_error, **_recorded(result)}
                    post = self._settle(
                        "PostToolUse",
                        await hooks.post_tool(
                            self._scope(turn_id),
                            call.name,
                            arguments,
                            call_id,
                            response,
                            error=result.output if result.is_error else None,
                        ),
                    )
                    if post.stop:
                        self._stopping = post.stop_reason
                    if post.blocked:
                        result = replace(
                            result, output=f"{result.output}\n[PostToolUse hook: {post.reason}]", is_error=True
                        )
        self.session.record(
            "tool/result",
            call_id=call_id,
            name=call.name,
            output=result.output,
            is_error=result.is_error,
            data=_recorded(result),
        )
        return result


def _recorded(result: ToolResult) -> dict[str, Any]:
    """The ``data`` a ``tool/result`` event records and PostToolUse hooks see: JSON-able, ``blocked`` when refused."""
    data = dict(result.data)
    if result.blocked:
        data["blocked"] = True
    try:
        # The common case (shell tools) is JSON already: checked by one encoding, not rebuilt.
        json.dumps(data)
        return data
    except (TypeError, ValueError):
        return dict(json.loads(json.dumps(data, default=str)))


SPAWN_DESCRIPTION = (
    "Start a subagent of the given type on a task in a new child session and return its final answer. "
    "Subagents run concurrently with other tool calls."
)


class SpawnTool:
    """The ``spawn_agent`` tool: a child session (new id, parent recorded, depth + 1) and its turn."""

    spec = ToolSpec(
        name="spawn_agent",
        description=SPAWN_DESCRIPTION,
        parameters={
            "type": "object",
            "properties": {
                "agent_type": {"type": "string", "description": "Which kind of subagent."},
                "prompt": {"type": "string", "description": "The subagent's task."},
            },
            "required": ["agent_type", "prompt"],
            "additionalProperties": False,
        },
    )

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._count = itertools.count(1)

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        parent = _current_agent.get()
        agent_type, prompt = arguments.get("agent_type"), arguments.get("prompt")
        if parent is None or execution.agent is None:
            return ToolResult("spawn_agent needs a calling agent", is_error=True)
        if not isinstance(agent_type, str) or not isinstance(prompt, str):
            return ToolResult("arguments 'agent_type' and 'prompt' must be strings", is_error=True)
        store = self._ctx.require(SESSIONS)
        child_session = store.spawn(parent.session.header)
        child = Agent(
            parent.ctx,
            child_session,
            parent.model.subagent(agent_type),
            name=f"{agent_type}-{next(self._count)}",
            agent_type=agent_type,
            parent=parent,
            parent_turn_id=execution.turn_id,
        )
        location = child_session.locate()
        ids = {"agent_id": child_session.id, "agent_type": agent_type}
        parent.session.record("subagent/start", session_id=child_session.id, **ids)
        hooks = parent._hooks()
        if hooks is not None:
            start = parent._settle(
                "SubagentStart",
                await hooks.subagent_start(parent._scope(execution.turn_id), child_session.id, agent_type),
                context_for=child_session,
            )
            if start.stop:
                parent._stopping = start.stop_reason
                parent.session.record("subagent/end", session_id=child_session.id, text="", stopped=start.stop_reason)
                return ToolResult(f"stopped by a SubagentStart hook: {start.stop_reason}", is_error=True)
        # The child's own turn fires SubagentStop (in the parent's name) when it finishes.
        turn = await child.run_turn(prompt)
        parent.session.record("subagent/end", session_id=child_session.id, text=turn.text)
        return ToolResult(
            turn.text,
            data={
                "session_id": child_session.id,
                "location": None if location is None else location.to_dict(),
            },
        )


def _apply_spawn(ctx: Context, config: None) -> None:
    ctx.require(TOOLS).register(SpawnTool(ctx))


spawn_plugin = Plugin(name="spawn-agent", apply=_apply_spawn, inject=(TOOLS, SESSIONS))
"""Registers the ``spawn_agent`` tool."""
