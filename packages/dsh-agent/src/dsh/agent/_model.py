"""Models: the protocol the loop drives, and the keyless scripted model.

:class:`ToolCall` is a plain dataclass (``dsh exec`` builds a call with no pydantic); a script is
validated by pydantic, which checks it as a field of :class:`~dsh.agent.ModelStep` (``_steps``, a
module ``dsh exec`` never imports: it runs no model step).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

from dsh.session import Session, ToolSpec

from ._errors import ScriptError

if TYPE_CHECKING:
    from ._script import Script
    from ._steps import ModelStep


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One tool call the model asks for."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}  # read when a script is validated

    id: str | None = None
    name: str
    arguments: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("has an empty name")


class Model(Protocol):
    """What the agent loop drives."""

    name: str

    def begin_turn(self, prompt: str) -> None:
        """A turn starts with ``prompt``."""
        ...

    async def step(self, session: Session, tools: Sequence[ToolSpec]) -> ModelStep:
        """The next response, given the session so far and the available tools."""
        ...

    def subagent(self, agent_type: str) -> Model:
        """The model a spawned subagent of ``agent_type`` runs on."""
        ...


class ScriptedModel:
    """Replays scripted steps: each turn takes the next turn's steps, in order.

    When a turn's steps run out the model answers with empty text, ending the turn.
    """

    def __init__(
        self,
        turns: Sequence[Sequence[ModelStep]],
        subagents: dict[str, list[ModelStep]] | None = None,
        name: str = "dsh-scripted",
    ) -> None:
        self.name = name
        self._turns = deque(list(t) for t in turns)
        self._steps: deque[ModelStep] = deque()
        self._subagents = subagents or {}

    @classmethod
    def from_script(cls, script: Script) -> ScriptedModel:
        """The model for a script's main agent."""
        return cls([t.steps for t in script.turns], script.subagents, script.model)

    def begin_turn(self, prompt: str) -> None:
        """Move to the next scripted turn."""
        self._steps = deque(self._turns.popleft()) if self._turns else deque()

    async def step(self, session: Session, tools: Sequence[ToolSpec]) -> ModelStep:
        """The next scripted step, or an empty final step."""
        if self._steps:
            return self._steps.popleft()
        from ._steps import ModelStep

        return ModelStep()

    def subagent(self, agent_type: str) -> ScriptedModel:
        """A model replaying ``subagents[agent_type]`` as one turn."""
        if agent_type not in self._subagents:
            known = ", ".join(sorted(self._subagents)) or "none"
            raise ScriptError(
                f"the script has no subagent '{agent_type}'; scripted subagents: {known}", subagent=agent_type
            )
        return ScriptedModel([self._subagents[agent_type]], self._subagents, self.name)
