"""Where a hook event fires: the session whose identity payloads carry, and the agent inside it."""

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from dsh.session import SessionEvent, SessionHeader


class HookScope(NamedTuple):
    """Where an event fires: the session whose identity payloads carry, and the agent inside it."""

    header: "SessionHeader"
    turn_id: str | None = None
    agent_id: str | None = None
    """Set inside a subagent (the subagent's session id), with ``agent_type``."""
    agent_type: str | None = None
    parent: "HookScope | None" = None
    """The spawning agent's scope, inside a subagent: ``SubagentStop`` carries its identity."""
    events: "Callable[[], Sequence[SessionEvent]] | None" = None
    """The session's events known so far (flushed or not), asked for only when a hook is handed
    a transcript view in its dialect's own format; None when the host cannot say (``transcript_path`` is then
    the persistence's ``locate()``)."""
    ambient: "Mapping[str, str] | None" = None
    """The environment the session's hooks start from when it is not this process's (a served
    client's: ``ToolExecution.ambient``); None: ``os.environ``."""

    def agent_fields(self) -> dict[str, Any]:
        """``agent_id`` and ``agent_type`` when inside a subagent, else nothing."""
        return {} if self.agent_id is None else {"agent_id": self.agent_id, "agent_type": self.agent_type}
