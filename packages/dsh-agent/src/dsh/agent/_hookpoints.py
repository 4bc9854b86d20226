"""An agent's side of its hooks: the runner decides, the agent records what they did and tells the user."""

from __future__ import annotations

from dsh.core import Context, ServiceKey
from dsh.session import Session

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from dsh.hooks import HookOutcome, HookRunner, HookScope, Notice

# Named here rather than imported: dsh.hooks (and asyncio with it) is only imported when a
# deployment loads hooks.
HOOKS: ServiceKey[HookRunner] = ServiceKey("hooks")


class HookPoints:
    """The hook-facing half of :class:`~dsh.agent.Agent`: scopes, and settling what hooks did."""

    ctx: Context
    session: Session
    agent_type: str
    parent: HookPoints | None
    parent_turn_id: str | None
    notify: Callable[[Notice], None] | None

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
        from dsh.hooks import reports_as_data

        data: dict[str, Any] = {"event": event, "reports": reports_as_data(outcome.reports)}
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
                import logging

                logging.getLogger("dsh.agent").warning("%s", notice.text)
        return outcome

    async def _background_hooks(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            self._settle("async", await hooks.background())
