"""The dsh agent: the loop, the keyless scripted model, subagents, the default deployment and ``dsh``.

Exports resolve lazily, so ``python -m dsh.agent`` and the ``dsh`` script import only what a verb needs.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: importing it is a measurable part of a served `dsh exec`
if TYPE_CHECKING:
    from typing import Any

    from ._errors import MissingPluginError, ScriptError, ServeError, TranscriptNotSaved, UsageError
    from ._loop import Agent
    from ._model import Model, ScriptedModel, ToolCall
    from ._runtime import BUILTINS, DEFAULT_SOURCE, default_deployment, open_runtime
    from ._script import Script, ScriptTurn, load_script
    from ._spawn import SPAWN_DESCRIPTION, SpawnTool, spawn_plugin
    from ._steps import ModelStep, TurnResult

_EXPORTS = {
    "SPAWN_DESCRIPTION": "._spawn",
    "Agent": "._loop",
    "SpawnTool": "._spawn",
    "MissingPluginError": "._errors",
    "ScriptError": "._errors",
    "ServeError": "._errors",
    "TranscriptNotSaved": "._errors",
    "UsageError": "._errors",
    "TurnResult": "._steps",
    "spawn_plugin": "._spawn",
    "Model": "._model",
    "ModelStep": "._steps",
    "Script": "._script",
    "ScriptTurn": "._script",
    "ScriptedModel": "._model",
    "ToolCall": "._model",
    "load_script": "._script",
    "BUILTINS": "._runtime",
    "DEFAULT_SOURCE": "._runtime",
    "default_deployment": "._runtime",
    "open_runtime": "._runtime",
}

__all__ = [
    "BUILTINS",
    "DEFAULT_SOURCE",
    "SPAWN_DESCRIPTION",
    "Agent",
    "MissingPluginError",
    "Model",
    "ModelStep",
    "Script",
    "ScriptError",
    "ScriptTurn",
    "ScriptedModel",
    "ServeError",
    "SpawnTool",
    "ToolCall",
    "TranscriptNotSaved",
    "TurnResult",
    "UsageError",
    "default_deployment",
    "load_script",
    "open_runtime",
    "spawn_plugin",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsh.agent' has no attribute {name!r}")
    import importlib  # here, not at the top: the served `dsh exec` client never needs it

    return getattr(importlib.import_module(module, __name__), name)
