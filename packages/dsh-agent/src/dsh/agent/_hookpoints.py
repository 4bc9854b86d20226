"""An agent's side of its hooks: the runner decides, the agent records what they did and tells the user."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh.core import Context
from dsh.session import Session, SessionEvent, ToolResult

from ._hookseam import HOOKS, STOP_BLOCK_CAP, HookScope, HookVerdict, LoopHooks, Notice
from ._model import ToolCall
from ._turns import recorded

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any


class HookPoints:
    """The hook-facing half of :class:`~dsh.agent.Agent`: scopes, and settling what hooks did."""

    ctx: Context
    session: Session
    agent_type: str
    parent: HookPoints | None
    parent_turn_id: str | None
    notify: Callable[[Notice], None] | None
    ambient: Mapping[str, str] | None
    _stopping: str | None
    """Why a hook said the turn must stop (``continue: false``), once one did."""

    def _hooks(self) -> LoopHooks | None:
        return self.ctx.get(HOOKS)

    def _scope(self, turn_id: str | None) -> HookScope:
        if self.parent is None:
            return HookScope(self.session.header, turn_id, events=self._events, ambient=self.ambient)
        parent = self.parent._scope(self.parent_turn_id)
        header, kind = self.session.header, self.agent_type
        return HookScope(header, turn_id, self.session.id, kind, parent, events=self._events, ambient=self.ambient)

    def _events(self) -> list[SessionEvent]:
        """The session's events so far, flushed or not: a hook handed the Claude-Code-format transcript reads them."""
        return self.session.history

    def _settle(self, event: str, outcome: HookVerdict, context_for: Session | None = None) -> HookVerdict:
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
            self._tell(notice)
        return outcome

    def _tell(self, notice: Notice) -> None:
        if self.notify is not None:
            self.notify(notice)
        else:
            from dsh.paths.log import logger

            logger("dsh.agent").warning("%s", notice.text)

    def _stop_capped(self, event: str, blocks: int, reason: str) -> bool:
        """Whether a Stop block after ``blocks`` in a row is overridden (Claude Code's cap); if so, say so."""
        if blocks < STOP_BLOCK_CAP:
            return False
        notice = (
            f"{event} hooks blocked the agent from stopping {blocks} times in a row; the stop goes through "
            f"(the cap is {STOP_BLOCK_CAP}, as in Claude Code). Last reason: {reason}"
        )
        self._warn(event, notice)
        return True

    def _warn(self, event: str, text: str) -> None:
        """Record a warning of the loop's own about ``event``'s hooks, as their result, and tell the user."""
        self.session.record("hook/result", event=event, reports=[], warnings=[text])
        self._tell(Notice("warning", text))

    async def _post_tool_batch(self, calls: Sequence[ToolCall], results: Sequence[ToolResult], turn_id: str) -> None:
        """PostToolBatch once a step's calls have all finished: what the hooks add (context, a blocking
        reason) goes to the model, and ``continue: false`` ends the turn."""
        hooks = self._hooks()
        assert hooks is not None
        batch = [(c.name, c.arguments, c.id or "", _response(r)) for c, r in zip(calls, results, strict=True)]
        outcome = self._settle("PostToolBatch", await hooks.post_tool_batch(self._scope(turn_id), batch))
        if outcome.blocked:  # as after one call: the reason is for the model to read
            text = f"[PostToolBatch hook: {outcome.reason}]"
            self.session.record("message/context", text=text, source="hook", event="PostToolBatch")
        if outcome.stop:
            self._stopping = outcome.stop_reason

    async def _model_point(self, turn_id: str, answer: tuple[str, Sequence[Mapping[str, Any]]] | None) -> str | None:
        """``BeforeModel`` (``answer`` None) or ``AfterModel`` (the model's text and tool calls), in the
        dialects that have them: why the turn must end (a hook blocked or stopped it), else None."""
        hooks = self._hooks()
        assert hooks is not None
        scope = self._scope(turn_id)
        if answer is None:
            outcome = self._settle("BeforeModel", await hooks.before_model(scope))
        else:
            outcome = self._settle("AfterModel", await hooks.after_model(scope, answer[0], answer[1]))
        if outcome.stop:
            return outcome.stop_reason
        return outcome.reason if outcome.blocked else None

    async def _stop_failure(self, error: Exception, turn_id: str) -> None:
        """StopFailure when the turn ends on an error (of the model or its provider); recorded only."""
        hooks = self._hooks()
        assert hooks is not None
        last = next((e.data.get("text") for e in reversed(self.session.history) if e.type == "message/assistant"), None)
        self._settle("StopFailure", await hooks.stop_failure(self._scope(turn_id), error, last or None))

    async def _background_hooks(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            self._settle("async", await hooks.background())

    async def _pre_tool(
        self, call: ToolCall, call_id: str, turn_id: str | None
    ) -> tuple[Mapping[str, Any], ToolResult | None]:
        """PreToolUse: the arguments the tool gets (a hook may rewrite them), or the refusal replacing the call."""
        hooks = self._hooks()
        assert hooks is not None
        pre = self._settle("PreToolUse", await hooks.pre_tool(self._scope(turn_id), call.name, call.arguments, call_id))
        if pre.stop:
            self._stopping = pre.stop_reason
            return call.arguments, ToolResult(
                f"stopped by a PreToolUse hook: {pre.stop_reason}", is_error=True, blocked=True
            )
        if pre.blocked:
            return call.arguments, ToolResult(
                f"blocked by a PreToolUse hook: {pre.reason}", is_error=True, blocked=True
            )
        if pre.updated_input is None:
            return call.arguments, None
        arguments = dict(pre.updated_input)
        self.session.record(
            "tool/input_updated", call_id=call_id, name=call.name, original=call.arguments, arguments=arguments
        )
        return arguments, None

    async def _post_tool(
        self, call: ToolCall, call_id: str, arguments: Mapping[str, Any], turn_id: str | None, result: ToolResult
    ) -> ToolResult:
        """PostToolUse: the result as the model will see it (a blocking hook's reason appended)."""
        hooks = self._hooks()
        assert hooks is not None
        response = _response(result)
        error = result.output if result.is_error else None
        post = self._settle(
            "PostToolUse",
            await hooks.post_tool(self._scope(turn_id), call.name, arguments, call_id, response, error=error),
        )
        if post.stop:
            self._stopping = post.stop_reason
        if post.blocked:
            return result._replace(output=f"{result.output}\n[PostToolUse hook: {post.reason}]", is_error=True)
        return result


def _response(result: ToolResult) -> dict[str, Any]:
    """A result as PostToolUse and PostToolBatch hooks see it: its record, with its own output and
    error flag winning over keys of the same name in its data."""
    return {**recorded(result), "output": result.output, "is_error": result.is_error}
