"""The agent loop: turns, tool calls with hooks, the turn-end flush, and subagents."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh.core import Context, Plugin, ServiceKey
from dsh.loader import CATALOG
from dsh.session import SESSIONS, TOOLS, AgentRef, Session, ToolExecution, ToolResult, ToolSpec

from ._model import Model, ToolCall

if TYPE_CHECKING:
    from dsh.hooks import HookRunner

# Named here rather than imported: dsh.hooks is only imported when a deployment loads hooks.
HOOKS: ServiceKey[HookRunner] = ServiceKey("hooks")

_current_agent: ContextVar[Agent | None] = ContextVar("dsh_current_agent", default=None)


def _new_call_id() -> str:
    return f"call-{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True)
class HookVerdict:
    """What the hooks of one event decided (nothing, when no hooks are loaded)."""

    blocked: bool = False
    stop: bool = False
    reason: str = ""


@dataclass
class TurnResult:
    """What one turn produced."""

    turn_id: str
    text: str = ""
    tool_results: list[tuple[ToolCall, ToolResult]] = field(default_factory=list)
    blocked: str | None = None
    """Why a UserPromptSubmit hook blocked the turn, if it did."""


class Agent:
    """One agent bound to one session: runs turns, calls tools, flushes at turn end."""

    def __init__(
        self,
        ctx: Context,
        session: Session,
        model: Model,
        *,
        name: str = "main",
        agent_type: str = "main",
        max_steps: int = 64,
    ) -> None:
        self.ctx = ctx
        self.session = session
        self.model = model
        self.name = name
        self.agent_type = agent_type
        self.max_steps = max_steps
        self.ref = AgentRef(name=name, header=session.header, agent_type=agent_type)

    def _tool_specs(self) -> list[ToolSpec]:
        tools = self.ctx.get(TOOLS)
        return [] if tools is None else tools.specs()

    async def _hook(self, event: str, turn_id: str | None, fields: Mapping[str, Any]) -> HookVerdict:
        hooks = self.ctx.get(HOOKS)
        if hooks is None:
            return HookVerdict()
        outcome = await hooks.dispatch(event, self.session.header, turn_id=turn_id, fields=fields)
        if not outcome.reports:
            return HookVerdict()
        from dsh.hooks import reports_as_data

        self.session.record("hook/result", event=event, reports=reports_as_data(outcome.reports))
        return HookVerdict(outcome.blocked, outcome.stop, outcome.reason)

    async def start(self, source: str = "startup") -> HookVerdict:
        """Fire SessionStart (``startup``, ``resume`` or ``fork``)."""
        return await self._hook("SessionStart", None, {"source": source})

    def _open_turn(self, **data: Any) -> str:
        # Installed distributions are re-read at every turn start; unchanged, that costs a few stats.
        catalog = self.ctx.get(CATALOG)
        if catalog is not None:
            catalog.refresh()
        turn_id = f"{self.session.id}:turn-{self.session.turns + 1}"
        self.session.record("turn/start", turn_id=turn_id, agent=self.name, **data)
        return turn_id

    async def run_turn(self, prompt: str) -> TurnResult:
        """Run one turn to its end and flush the transcript (the checkpoint), even on failure."""
        turn_id = self._open_turn()
        result = TurnResult(turn_id)
        session = self.session
        try:
            session.record("message/user", text=prompt)
            outcome = await self._hook("UserPromptSubmit", turn_id, {"prompt": prompt})
            if outcome.blocked or outcome.stop:
                result.blocked = outcome.reason
                return result
            self.model.begin_turn(prompt)
            stop_hook_active = False
            for _ in range(self.max_steps):
                step = await self.model.step(session, self._tool_specs())
                calls = [c if c.id else c.model_copy(update={"id": _new_call_id()}) for c in step.tool_calls]
                session.record(
                    "message/assistant",
                    text=step.text,
                    tool_calls=[c.model_dump() for c in calls],
                )
                if calls:
                    results = await asyncio.gather(*(self.call_tool(c, turn_id) for c in calls))
                    result.tool_results.extend(zip(calls, results, strict=True))
                    continue
                result.text = step.text
                stop = await self._hook(
                    "Stop", turn_id, {"stop_hook_active": stop_hook_active, "last_assistant_message": step.text or None}
                )
                if stop.blocked and not stop_hook_active:
                    # A Stop hook that blocks asks the model to go on, with the reason as the prompt.
                    stop_hook_active = True
                    session.record("message/user", text=stop.reason, source="stop_hook")
                    continue
                break
            return result
        except Exception as exc:
            session.record("error", message=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            session.record("turn/end", turn_id=turn_id, blocked=result.blocked)
            session.flush()

    async def run_tool_turn(self, call: ToolCall, source: str = "exec") -> ToolResult:
        """One turn made of a single tool call, as ``dsh exec`` runs it; flushed at its end."""
        turn_id = self._open_turn(source=source)
        try:
            return await self.call_tool(call, turn_id)
        finally:
            self.session.record("turn/end", turn_id=turn_id)
            self.session.flush()

    async def call_tool(self, call: ToolCall, turn_id: str | None = None) -> ToolResult:
        """Run one tool call as the model would: PreToolUse hooks, the tool, PostToolUse hooks, the record."""
        call_id = call.id or _new_call_id()
        execution = ToolExecution(
            tool=call.name, call_id=call_id, arguments=call.arguments, agent=self.ref, turn_id=turn_id
        )
        self.session.record("tool/call", call_id=call_id, name=call.name, arguments=call.arguments)
        tools = self.ctx.get(TOOLS)
        tool = None if tools is None else tools.get(call.name)
        hook_fields = {"tool_name": call.name, "tool_input": call.arguments, "tool_use_id": call_id}
        if tool is None:
            known = ", ".join(s.name for s in self._tool_specs()) or "none"
            result = ToolResult(f"no tool named '{call.name}'; tools: {known}", is_error=True)
        else:
            pre = await self._hook("PreToolUse", turn_id, hook_fields)
            if pre.blocked:
                result = ToolResult(
                    f"blocked by a PreToolUse hook: {pre.reason}", is_error=True, data={"blocked": True}
                )
            else:
                token = _current_agent.set(self)
                try:
                    result = await tool(call.arguments, execution)
                except Exception as exc:
                    result = ToolResult(f"tool '{call.name}' failed: {type(exc).__name__}: {exc}", is_error=True)
                finally:
                    _current_agent.reset(token)
                response = {"output": result.output, "is_error": result.is_error, **_jsonable(result.data)}
                post = await self._hook("PostToolUse", turn_id, {**hook_fields, "tool_response": response})
                if post.blocked:
                    result = ToolResult(f"{result.output}\n[PostToolUse hook: {post.reason}]", True, result.data)
        self.session.record(
            "tool/result",
            call_id=call_id,
            name=call.name,
            output=result.output,
            is_error=result.is_error,
            data=_jsonable(result.data),
        )
        return result


def _jsonable(data: Mapping[str, Any]) -> dict[str, Any]:
    return dict(json.loads(json.dumps(dict(data), default=str)))


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
        )
        location = child_session.locate()
        ids = {"agent_id": child_session.id, "agent_type": agent_type}
        parent.session.record("subagent/start", session_id=child_session.id, **ids)
        await parent._hook("SubagentStart", execution.turn_id, ids)
        turn = await child.run_turn(prompt)
        await parent._hook(
            "SubagentStop",
            execution.turn_id,
            {
                **ids,
                "agent_transcript_path": None if location is None else location.path,
                "stop_hook_active": False,
                "last_assistant_message": turn.text or None,
            },
        )
        parent.session.record("subagent/end", session_id=child_session.id, text=turn.text)
        return ToolResult(
            turn.text,
            data={
                "session_id": child_session.id,
                "location": None if location is None else location.model_dump(),
            },
        )


def _apply_spawn(ctx: Context, config: None) -> None:
    ctx.require(TOOLS).register(SpawnTool(ctx))


spawn_plugin = Plugin(name="spawn-agent", apply=_apply_spawn, inject=(TOOLS, SESSIONS))
"""Registers the ``spawn_agent`` tool."""
