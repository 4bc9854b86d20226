"""Models: the protocol the loop drives, how a deployment's provider produces one, and the scripted model.

A model provider is a plugin (name, ``Config``, ``apply``) in the ``dsh.models`` entry-point group
whose ``apply`` provides the :data:`MODEL` service: ``ctx.provide(MODEL, MyModel(config))``. The
deployment's ``model: {provider: NAME, config: {...}}`` (or ``dsh run --model NAME``) picks it;
:func:`load_model` loads it and checks the object against :class:`Model`, so a provider that
does not satisfy the protocol is one error naming its entry point, never a ``TypeError`` mid-turn.

:class:`ToolCall` is a checked ``NamedTuple`` (``dsh exec`` builds a call with no pydantic); a script
is read into it by dsh-loader's pydantic bridge, as a field of :class:`~dsh.agent.ModelStep` (``_steps``,
a module ``dsh exec`` never imports: it runs no model step), and its ``__new__`` checks it there too.
"""

from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from dsh.core import ServiceKey
from dsh.session import EMPTY_MAPPING, Session, ToolSpec

from ._errors import ModelError, ScriptError

if TYPE_CHECKING:
    from dsh.loader import ModelChoice, Runtime

    from ._steps import ModelStep
    from .script import Script


class _ToolCallFields(NamedTuple):
    name: str
    id: str | None = None
    arguments: Mapping[str, object] = EMPTY_MAPPING
    error: str | None = None


class ToolCall(_ToolCallFields):
    """One tool call the model asks for; a ``ValueError`` when its ``name`` is empty.

    ``error`` says why the call cannot run as the model gave it (its arguments were not a JSON
    object, say): the loop records the call and answers it with ``error`` as a failed result,
    without running the tool, so the model can correct itself. ``_replace`` skips the check (it
    keeps a checked name unless given another), and so does ``_make``.
    """

    __slots__ = ()

    def __new__(
        cls,
        name: str,
        id: str | None = None,
        arguments: Mapping[str, object] = EMPTY_MAPPING,
        error: str | None = None,
    ) -> "ToolCall":
        if not name:
            raise ValueError("has an empty name")  # pydantic places it at the call: "field '...' has an empty name"
        return super().__new__(cls, name, id, arguments, error)

    def to_json(self) -> dict[str, object]:
        """The call as ``message/assistant`` records it (``error`` only when set)."""
        data: dict[str, object] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.error is not None:
            data["error"] = self.error
        return data


class Model(Protocol):
    """What the agent loop drives; every member is required.

    - ``name``: a non-empty string, the model's name as ``model/request`` events record it
      (a provider's model id, ``deepseek-chat`` say).
    - ``begin_turn(prompt)``: a turn starts with the user's ``prompt`` (already recorded in the
      session as ``message/user``). A stateless provider does nothing.
    - ``async step(session, tools)``: a coroutine function returning the next
      :class:`~dsh.agent.ModelStep` given the session so far (``session.history``: every event,
      stored and not yet flushed) and the tools offered. A step with tool calls runs them (all of
      one step concurrently) and asks again; a step without ends the turn. A provider's fault
      (refused key, rate limit, server error, timeout) raises :class:`~dsh.agent.ModelError`:
      the turn is recorded as failed with that reason and the session stays resumable.
    - ``subagent(agent_type)``: the model a subagent of ``agent_type`` spawned by this one runs on.

    A model built from the session's history alone (as dsh's providers are) continues a resumed
    or forked session exactly as the live one would have.
    """

    name: str

    def begin_turn(self, prompt: str) -> None:
        """A turn starts with ``prompt``."""
        ...

    async def step(self, session: Session, tools: Sequence[ToolSpec]) -> "ModelStep":
        """The next response, given the session so far and the available tools."""
        ...

    def subagent(self, agent_type: str) -> "Model":
        """The model a spawned subagent of ``agent_type`` runs on."""
        ...


MODEL: ServiceKey[Model] = ServiceKey("model")
"""The service a ``dsh.models`` provider plugin provides: the :class:`Model` the agent runs on."""


def check_model(model: object, where: str) -> Model:
    """Return ``model`` if it satisfies :class:`Model`; else raise :class:`ModelError` naming ``where``.

    ``where`` names who produced it (``model provider 'openai' (dsh-model-openai 0.1.0)``).
    """
    import inspect  # here, not at the top: ``dsh exec`` imports this module and drives no model

    problems = []
    name = getattr(model, "name", None)
    if not isinstance(name, str) or not name.strip():
        problems.append(f"its name is {name!r}, not a non-empty string")
    for member in ("begin_turn", "subagent"):
        if not callable(getattr(model, member, None)):
            problems.append(f"it has no method {member}()")
    step = getattr(model, "step", None)
    if not callable(step):
        problems.append("it has no method step()")
    elif not inspect.iscoroutinefunction(step):
        problems.append("its step() is not a coroutine function (declare it `async def step`)")
    if problems:
        raise ModelError(
            f"{where} produced {type(model).__name__}, which is not a dsh Model: "
            + "; ".join(problems)
            + " (see dsh.agent.Model)",
            provider=where,
        )
    return model  # type: ignore[return-value]


def load_model(runtime: "Runtime", choice: "ModelChoice | None" = None) -> Model:
    """Load the deployment's model provider (or ``choice``) into ``runtime`` and return its checked model.

    Raises :class:`~dsh.loader.BootError` when the provider cannot be loaded (not installed, a bad
    config) and :class:`ModelError` when what it provides is not a :class:`Model`.
    """
    fiber = runtime.load_model(choice)
    origin = fiber.origin
    where = (
        f"model provider '{fiber.name}'"
        if origin is None
        else f"model provider '{origin.name}' ({origin.distribution} {origin.version})"
    )
    model = runtime.ctx.get(MODEL)
    if model is None:
        raise ModelError(
            f"{where} loaded but provides no model (its apply must call ctx.provide(MODEL, ...))", provider=where
        )
    return check_model(model, where)


class ScriptedModel:
    """Replays scripted steps: each turn takes the next turn's steps, in order.

    When a turn's steps run out the model answers with empty text, ending the turn.
    """

    def __init__(
        self,
        turns: "Sequence[Sequence[ModelStep]]",
        subagents: "Mapping[str, Sequence[ModelStep]] | None" = None,
        name: str = "dsh-scripted",
    ) -> None:
        self.name = name
        self._turns = deque(list(t) for t in turns)
        self._steps: deque[ModelStep] = deque()
        self._subagents: Mapping[str, Sequence[ModelStep]] = subagents or {}

    @classmethod
    def from_script(cls, script: "Script") -> "ScriptedModel":
        """The model for a script's main agent."""
        return cls([t.steps for t in script.turns], script.subagents, script.model)

    def begin_turn(self, prompt: str) -> None:
        """Move to the next scripted turn."""
        self._steps = deque(self._turns.popleft()) if self._turns else deque()

    async def step(self, session: Session, tools: Sequence[ToolSpec]) -> "ModelStep":
        """The next scripted step, or an empty final step."""
        if self._steps:
            return self._steps.popleft()
        from ._steps import ModelStep

        return ModelStep()

    def subagent(self, agent_type: str) -> "ScriptedModel":
        """A model replaying ``subagents[agent_type]`` as one turn."""
        if agent_type not in self._subagents:
            known = ", ".join(sorted(self._subagents)) or "none"
            raise ScriptError(
                f"the script has no subagent '{agent_type}'; scripted subagents: {known}", subagent=agent_type
            )
        return ScriptedModel([self._subagents[agent_type]], self._subagents, self.name)
