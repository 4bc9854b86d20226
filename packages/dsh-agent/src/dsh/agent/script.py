"""Scripts of the keyless model (``dsh run --script``): read from YAML or JSON, validated by pydantic."""

import json
import os
from typing import Annotated, Any, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    PlainSerializer,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from dsh.core import Context, Plugin
from dsh.loader.validation import format_validation_error
from dsh.paths import read_regular_text

from ._errors import ScriptError
from ._model import ToolCall
from ._steps import ModelStep


def _from_mapping(record: type[Any], form: type[BaseModel]) -> tuple[Any, ...]:
    """How a script reads ``record`` (a NamedTuple): pydantic metadata reading a mapping as ``form`` types it.

    pydantic's own reading of a NamedTuple also takes a list of its values in order and words its
    errors its own way; a script's step and call are mappings (unknown keys refused), so a list is
    "must be a mapping". The record is built from the fields given (its own defaults for the rest,
    a list as a tuple), so its ``__new__`` checks it; one given as itself (a script built in Python)
    is kept. ``Script.model_dump()`` writes it back as the form does, nested records included.
    """

    def build(value: Any, validate: ValidatorFunctionWrapHandler) -> Any:
        if isinstance(value, record):
            return value
        given = validate(value)
        fields = {name: getattr(given, name) for name in given.model_fields_set}
        return record(**{name: tuple(v) if isinstance(v, list) else v for name, v in fields.items()})

    return (
        GetPydanticSchema(lambda _source, handler: handler(form)),
        WrapValidator(build),
        PlainSerializer(lambda value: form.model_validate(value._asdict()).model_dump()),
    )


class _CallForm(BaseModel):
    """A :class:`~dsh.agent.ToolCall` in a script (an empty ``name`` is refused by the record itself)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    id: str | None = None
    arguments: dict[str, object] = Field(default_factory=dict)
    error: str | None = None


_ScriptCall = Annotated[ToolCall, *_from_mapping(ToolCall, _CallForm)]


class _StepForm(BaseModel):
    """A :class:`~dsh.agent.ModelStep` in a script."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    tool_calls: list[_ScriptCall] = Field(default_factory=list)
    reasoning: str = ""
    usage: dict[str, int] = Field(default_factory=dict)


_ScriptStep = Annotated[ModelStep, *_from_mapping(ModelStep, _StepForm)]


class ScriptTurn(BaseModel):
    """One scripted turn: the user's prompt and the model's steps."""

    model_config = ConfigDict(extra="forbid")

    user: str = ""
    steps: list[_ScriptStep] = Field(default_factory=list)


class Script(BaseModel):
    """A keyless run: turns for the main agent and steps for each subagent type."""

    model_config = ConfigDict(extra="forbid")

    model: str = "dsh-scripted"
    turns: list[ScriptTurn] = Field(default_factory=list)
    subagents: dict[str, list[_ScriptStep]] = Field(default_factory=dict)


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
        raise ScriptError(f"{source}: {format_validation_error(exc, schema=Script)}", path=source) from None


class ScriptedConfig(NamedTuple):
    """The ``scripted`` provider's config: the script its model replays (YAML or JSON)."""

    script: str


def _apply_scripted(ctx: Context, config: ScriptedConfig) -> None:
    from ._model import MODEL, ScriptedModel

    ctx.provide(MODEL, ScriptedModel.from_script(load_script(config.script)))


scripted_plugin = Plugin(name="scripted", apply=_apply_scripted, Config=ScriptedConfig)
"""The ``scripted`` entry of the ``dsh.models`` group: the keyless model replaying ``config.script``."""
