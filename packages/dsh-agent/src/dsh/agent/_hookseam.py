"""The loop's hook seam: where a turn asks hooks, and what it reads of their answer.

The loop names no hook dialect and runs no hook: it looks up the ``hooks`` service (:data:`HOOKS`)
and, when one is there, calls one :class:`LoopHooks` method per point of a turn (session start and
end, the prompt, each model request and answer, each tool call before and after, a step's batch of
calls, the stop, a failure, a subagent's start). What it gets back is a :class:`HookVerdict`: block,
stop, rewrite the input, add context, tell the user. dsh-hooks plugs its runner in here; any object
meeting :class:`LoopHooks` will do (a test double, another hook system).

The points are named as Claude Code and Codex name them (``PreToolUse``, ``Stop``, ...) and
``BeforeModel`` / ``AfterModel``; a hook dialect maps them to its peer's events.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from dsh.core import ServiceKey

if TYPE_CHECKING:
    from dsh.session import SessionEvent, SessionHeader

STOP_BLOCK_CAP = 8
"""Stop (or SubagentStop) blocks honoured in a row within a turn, the cap the peers document; the
next one is overridden: the agent stops, with a notice."""

ONE_CALL_POINTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "SessionEnd",
)
"""The points a one-turn run that calls one tool (``dsh exec``) passes (a failed call's included)."""


class HookScope(NamedTuple):
    """Where a point fires: the session whose identity payloads carry, and the agent inside it."""

    header: "SessionHeader"
    turn_id: str | None = None
    agent_id: str | None = None
    """Set inside a subagent (the subagent's session id), with ``agent_type``."""
    agent_type: str | None = None
    parent: "HookScope | None" = None
    """The spawning agent's scope, inside a subagent: ``SubagentStop`` carries its identity."""
    events: "Callable[[], Sequence[SessionEvent]] | None" = None
    """The session's events known so far (flushed or not), asked for only when a hook needs them (a
    transcript view in its dialect's own format, the conversation of a model request); None when the
    host cannot say."""
    ambient: Mapping[str, str] | None = None
    """The environment the session's hooks start from when it is not this process's (a served
    client's: ``ToolExecution.ambient``); None: ``os.environ``."""

    def agent_fields(self) -> dict[str, Any]:
        """``agent_id`` and ``agent_type`` when inside a subagent, else nothing."""
        return {} if self.agent_id is None else {"agent_id": self.agent_id, "agent_type": self.agent_type}


class Notice(NamedTuple):
    """A line for the user: a hook's ``systemMessage`` or a warning about a hook that failed."""

    kind: Literal["message", "warning"]
    text: str


class HookRecord(Protocol):
    """One hook's run, as a transcript's ``hook/result`` event records it."""

    def as_data(self) -> dict[str, Any]:
        """The run as plain data."""
        ...


class HookVerdict(Protocol):
    """What the hooks of one point decided, merged."""

    @property
    def reports(self) -> Sequence[HookRecord]:
        """One record per hook that ran."""
        ...

    @property
    def warnings(self) -> Sequence[str]:
        """Problems outside any one hook's run."""
        ...

    @property
    def blocked(self) -> bool:
        """Whether a hook blocked (the call, the prompt, the stop, the model request)."""
        ...

    @property
    def reason(self) -> str:
        """Why, for the model to read."""
        ...

    @property
    def stop(self) -> bool:
        """Whether a hook asked the agent to stop (``continue: false``)."""
        ...

    @property
    def stop_reason(self) -> str:
        """Why the hooks stopped the agent."""
        ...

    @property
    def updated_input(self) -> Mapping[str, Any] | None:
        """A tool call's input rewritten by a hook, in dsh's terms."""
        ...

    @property
    def context(self) -> Sequence[str]:
        """Text the hooks add to the conversation."""
        ...

    def notices(self) -> Sequence[Notice]:
        """What to tell the user."""
        ...


Batch = Sequence[tuple[str, Mapping[str, Any], str, Mapping[str, Any]]]
"""A step's calls: each call's tool, arguments, id and response."""


class LoopHooks(Protocol):
    """The ``hooks`` service as the loop calls it (dsh-hooks' ``HookRunner`` is one)."""

    def has_hooks(self, events: Sequence[str]) -> bool:
        """Whether a hook is configured for one of these points (cheap: no process, no matching)."""
        ...

    def session_env(self, header: "SessionHeader") -> Mapping[str, str]:
        """What SessionStart hooks exported for the session's calls."""
        ...

    async def session_start(
        self,
        header: "SessionHeader",
        source: str,
        *,
        events: "Callable[[], Sequence[SessionEvent]] | None" = None,
        ambient: Mapping[str, str] | None = None,
    ) -> HookVerdict: ...

    async def session_end(
        self,
        header: "SessionHeader",
        reason: str = "other",
        *,
        events: "Callable[[], Sequence[SessionEvent]] | None" = None,
        ambient: Mapping[str, str] | None = None,
    ) -> HookVerdict: ...

    async def user_prompt(self, scope: HookScope, prompt: str) -> HookVerdict: ...

    async def before_model(self, scope: HookScope) -> HookVerdict: ...

    async def after_model(
        self, scope: HookScope, text: str, tool_calls: Sequence[Mapping[str, Any]] = ()
    ) -> HookVerdict: ...

    async def pre_tool(
        self, scope: HookScope, tool: str, arguments: Mapping[str, Any], call_id: str
    ) -> HookVerdict: ...

    async def post_tool(
        self,
        scope: HookScope,
        tool: str,
        arguments: Mapping[str, Any],
        call_id: str,
        response: Mapping[str, Any],
        error: str | None = None,
    ) -> HookVerdict: ...

    async def post_tool_batch(self, scope: HookScope, calls: Batch) -> HookVerdict: ...

    async def stop(self, scope: HookScope, *, stop_hook_active: bool, last_message: str | None) -> HookVerdict: ...

    async def stop_failure(
        self, scope: HookScope, error: BaseException, last_message: str | None = None
    ) -> HookVerdict: ...

    async def subagent_start(self, scope: HookScope, agent_id: str, agent_type: str) -> HookVerdict: ...

    async def background(self) -> HookVerdict:
        """Verdicts of hooks that ran in the background and finished since the last call."""
        ...


HOOKS: ServiceKey[LoopHooks] = ServiceKey("hooks")
"""The hooks service the loop asks at each point; absent when the deployment has no hooks."""
