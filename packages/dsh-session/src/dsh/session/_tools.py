"""The tool contract shared by every tool package and the agent loop.

It lives here, beside :class:`ToolExecution`, so tool packages never import the agent.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, Self, runtime_checkable

from dsh.core import Disposer, Plugin, Registry, Service, ServiceKey

from ._empty import EMPTY_MAPPING
from ._model import SessionHeader
from .trace import TraceContext

if TYPE_CHECKING:
    from dsh.core import Context


class AgentRef(NamedTuple):
    """The agent that made a tool call, and the header of its session."""

    name: str
    header: SessionHeader
    agent_type: str = "main"


class _ExecutionFields(NamedTuple):
    tool: str
    call_id: str
    arguments: Mapping[str, Any]
    agent: AgentRef | None
    turn_id: str | None
    env: Mapping[str, str]
    ambient: Mapping[str, str] | None
    trace: TraceContext | None


class ToolExecution(_ExecutionFields):
    """One tool call: which tool, its id, its arguments, and the calling agent (if any).

    ``env`` is ordinary environment in-process plugins add for this call (exports of SessionStart
    hooks, say). Shell tools pass it in the ``env`` channel, so it never displaces a managed ``DSH_*``.
    ``ambient`` is the environment the call's children start from when it is not this process's
    (the client's, for a ``dsh exec`` served by ``dsh serve``); None: this process's ``os.environ``.
    ``trace`` is the span of this call in its run's trace (:mod:`dsh.session.trace`): the child
    gets it as ``TRACEPARENT``; None: no trace context (a call without a run).
    ``arguments`` and ``env`` given as None are empty read-only mappings.
    """

    __slots__ = ()

    def __new__(
        cls,
        tool: str,
        call_id: str,
        arguments: Mapping[str, Any] | None = None,
        agent: AgentRef | None = None,
        turn_id: str | None = None,
        env: Mapping[str, str] | None = None,
        ambient: Mapping[str, str] | None = None,
        trace: TraceContext | None = None,
    ) -> Self:
        return super().__new__(
            cls,
            tool,
            call_id,
            EMPTY_MAPPING if arguments is None else arguments,
            agent,
            turn_id,
            EMPTY_MAPPING if env is None else env,
            ambient,
            trace,
        )

    @property
    def session(self) -> SessionHeader | None:
        """The calling agent's session header, or None for a call without an agent."""
        return None if self.agent is None else self.agent.header


class ToolSpec(NamedTuple):
    """What the model sees of a tool: name, description, and a JSON Schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


class ToolResult(NamedTuple):
    """A tool's answer: text for the model, whether it is an error, and structured data.

    ``data`` is what the transcript records (JSON-able; an empty read-only mapping by default);
    ``value`` is the tool's own typed result for in-process callers (a shell tool's
    ``dsh.bash.ExecResult``), never serialised. ``blocked`` is the one place that says a hook
    refused the call, so it never ran. An immutable ``NamedTuple``: change one with ``_replace``.
    """

    output: str
    is_error: bool = False
    data: Mapping[str, Any] = EMPTY_MAPPING
    value: object | None = None
    blocked: bool = False


@runtime_checkable
class Tool(Protocol):
    """A model-facing tool."""

    @property
    def spec(self) -> ToolSpec:
        """The tool's name, description and argument schema."""
        ...

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        """Run the call."""
        ...


class ToolRegistry(Service):
    """The ``tools`` service; ``register`` is an effect of the calling plugin's fiber."""

    def __init__(self) -> None:
        self._tools: Registry[Tool] = Registry("tool")

    def register(self, tool: Tool) -> Disposer:
        """Add ``tool``; a second tool of the same name fails naming both plugins."""
        return self.register_keyed(self._tools, tool.spec.name, tool)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, if registered."""
        return self._tools.get(name)

    def specs(self) -> list[ToolSpec]:
        """Every registered tool's spec, sorted by name."""
        return [tool.spec for tool in self._tools.values()]


TOOLS: ServiceKey[ToolRegistry] = ServiceKey("tools")
"""The tool registry service."""


def _apply_tools(ctx: "Context", config: None) -> None:
    ctx.provide(TOOLS, ToolRegistry())


tools_plugin = Plugin(name="tools", apply=_apply_tools)
"""Provides an empty ``tools`` registry."""
