"""Scripts of the keyless model (``dsh run --script``): records read from YAML or JSON by dsh-loader's pydantic bridge.

A script is input read from a file, like a deployment: its records are ``NamedTuple``s (dsh's one
kind, root README), and :func:`load_script` validates the file's mapping into them with
:func:`dsh.loader.validation.validate_named_tuple`, the bridge deployments and plugin configs go
through (unknown keys refused, a list where a step or call is expected refused as "must be a
mapping", each error naming its field). pydantic and yaml are imported only when a script is read.
"""

import json
import os
from collections.abc import Mapping
from typing import NamedTuple

from dsh.core import Context, Plugin
from dsh.paths import read_regular_text
from dsh.session import EMPTY_MAPPING

from ._errors import ScriptError
from ._steps import ModelStep


class ScriptTurn(NamedTuple):
    """One scripted turn: the user's prompt and the model's steps."""

    user: str = ""
    steps: tuple[ModelStep, ...] = ()


class Script(NamedTuple):
    """A keyless run: turns for the main agent and steps for each subagent type."""

    model: str = "dsh-scripted"
    turns: tuple[ScriptTurn, ...] = ()
    subagents: Mapping[str, tuple[ModelStep, ...]] = EMPTY_MAPPING


def load_script(path: str | os.PathLike[str]) -> Script:
    """Read a script from YAML or JSON; errors name the file and field."""
    import yaml  # only scripts need it
    from pydantic import ValidationError

    from dsh.loader.validation import format_validation_error, validate_named_tuple

    source = os.fspath(path)
    try:
        text = read_regular_text(source, "script")
        raw = json.loads(text) if source.endswith(".json") else yaml.safe_load(text)
    except OSError as exc:
        raise ScriptError(f"{source}: cannot read script: {exc.strerror or exc}", path=source) from None
    except (ValueError, yaml.YAMLError) as exc:
        raise ScriptError(f"{source}: invalid script syntax: {exc}", path=source) from None
    try:
        script: Script = validate_named_tuple(Script, raw if raw is not None else {})
    except ValidationError as exc:
        raise ScriptError(f"{source}: {format_validation_error(exc, schema=Script)}", path=source) from None
    return script


class ScriptedConfig(NamedTuple):
    """The ``scripted`` provider's config: the script its model replays (YAML or JSON)."""

    script: str


def _apply_scripted(ctx: Context, config: ScriptedConfig) -> None:
    from ._model import MODEL, ScriptedModel

    ctx.provide(MODEL, ScriptedModel.from_script(load_script(config.script)))


scripted_plugin = Plugin(name="scripted", apply=_apply_scripted, Config=ScriptedConfig)
"""The ``scripted`` entry of the ``dsh.models`` group: the keyless model replaying ``config.script``."""
