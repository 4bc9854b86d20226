"""Subagents: the ``spawn_agent`` tool runs a child session's turn and answers with its final text."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from dsh.core import Context, Plugin
from dsh.session import SESSIONS, TOOLS, ToolExecution, ToolResult, ToolSpec

from ._loop import Agent, current_agent

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
        parent = current_agent.get()
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
        # A child that failed without an exception (its step cap) is a failed call, not an answer.
        failed = None if turn.failed is None else f"the subagent's turn failed: {turn.failed}"
        return ToolResult(
            turn.text if failed is None else "\n".join(t for t in (failed, turn.text) if t),
            is_error=failed is not None,
            data={
                "session_id": child_session.id,
                "location": None if location is None else location.to_dict(),
            },
        )


def _apply_spawn(ctx: Context, config: None) -> None:
    ctx.require(TOOLS).register(SpawnTool(ctx))


spawn_plugin = Plugin(name="spawn-agent", apply=_apply_spawn, inject=(TOOLS, SESSIONS))
"""Registers the ``spawn_agent`` tool."""
