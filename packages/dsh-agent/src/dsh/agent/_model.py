"""Models: the protocol the loop drives, and the keyless scripted model."""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dsh.core import DshError
from dsh.core.validation import format_validation_error
from dsh.session import Session, ToolSpec


class ToolCall(BaseModel):
    """One tool call the model asks for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = None
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ModelStep(BaseModel):
    """One model response: text, and the tool calls to run (none ends the turn)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


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


class ScriptTurn(BaseModel):
    """One scripted turn: the user's prompt and the model's steps."""

    model_config = ConfigDict(extra="forbid")

    user: str = ""
    steps: list[ModelStep] = Field(default_factory=list)


class Script(BaseModel):
    """A keyless run: turns for the main agent and steps for each subagent type."""

    model_config = ConfigDict(extra="forbid")

    model: str = "dsh-scripted"
    turns: list[ScriptTurn] = Field(default_factory=list)
    subagents: dict[str, list[ModelStep]] = Field(default_factory=dict)


def load_script(path: str | os.PathLike[str]) -> Script:
    """Read a script from YAML or JSON; errors name the file and field."""
    import yaml  # only scripts need it

    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
        raw = json.loads(text) if source.endswith(".json") else yaml.safe_load(text)
    except OSError as exc:
        raise DshError(f"{source}: cannot read script: {exc.strerror or exc}") from None
    except (ValueError, yaml.YAMLError) as exc:
        raise DshError(f"{source}: invalid script syntax: {exc}") from None
    try:
        return Script.model_validate(raw or {})
    except ValidationError as exc:
        raise DshError(f"{source}: {format_validation_error(exc)}") from None


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
        return self._steps.popleft() if self._steps else ModelStep()

    def subagent(self, agent_type: str) -> ScriptedModel:
        """A model replaying ``subagents[agent_type]`` as one turn."""
        if agent_type not in self._subagents:
            known = ", ".join(sorted(self._subagents)) or "none"
            raise DshError(f"the script has no subagent '{agent_type}'; scripted subagents: {known}")
        return ScriptedModel([self._subagents[agent_type]], self._subagents, self.name)
