"""Scripts of the keyless model (``dsh run --script``): read from YAML or JSON, validated by pydantic."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dsh.core import Context, Plugin
from dsh.loader.validation import format_validation_error
from dsh.paths import read_regular_text

from ._errors import ScriptError
from ._steps import ModelStep


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
        text = read_regular_text(source, "script")
        raw = json.loads(text) if source.endswith(".json") else yaml.safe_load(text)
    except OSError as exc:
        raise ScriptError(f"{source}: cannot read script: {exc.strerror or exc}", path=source) from None
    except (ValueError, yaml.YAMLError) as exc:
        raise ScriptError(f"{source}: invalid script syntax: {exc}", path=source) from None
    try:
        return Script.model_validate(raw or {})
    except ValidationError as exc:
        raise ScriptError(f"{source}: {format_validation_error(exc)}", path=source) from None


@dataclass(frozen=True, kw_only=True)
class ScriptedConfig:
    """The ``scripted`` provider's config: the script its model replays (YAML or JSON)."""

    script: str


def _apply_scripted(ctx: Context, config: ScriptedConfig) -> None:
    from ._model import MODEL, ScriptedModel

    ctx.provide(MODEL, ScriptedModel.from_script(load_script(config.script)))


scripted_plugin = Plugin(name="scripted", apply=_apply_scripted, Config=ScriptedConfig)
"""The ``scripted`` entry of the ``dsh.models`` group: the keyless model replaying ``config.script``."""
