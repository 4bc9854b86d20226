"""The dsh agent: the loop, the keyless scripted model, subagents, the default deployment and ``dsh``.

Exports resolve lazily, so ``python -m dsh.agent`` and the ``dsh`` script import only what a verb needs.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: importing it is a measurable part of a served `dsh exec`
if TYPE_CHECKING:
    from typing import Any

    from ._loop import (
        SPAWN_DESCRIPTION,
        Agent,
        SpawnTool,
        TranscriptNotSaved,
        TurnResult,
        spawn_plugin,
    )
    from ._model import Model, ModelStep, Script, ScriptedModel, ScriptTurn, ToolCall, load_script
    from ._runtime import BUILTINS, DEFAULT_SOURCE, default_deployment, open_runtime

_EXPORTS = {
    "SPAWN_DESCRIPTION": "._loop",
    "Agent": "._loop",
    "SpawnTool": "._loop",
    "TranscriptNotSaved": "._loop",
    "TurnResult": "._loop",
    "spawn_plugin": "._loop",
    "Model": "._model",
    "ModelStep": "._model",
    "Script": "._model",
    "ScriptTurn": "._model",
    "ScriptedModel": "._model",
    "ToolCall": "._model",
    "load_script": "._model",
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
    "Model",
    "ModelStep",
    "Script",
    "ScriptTurn",
    "ScriptedModel",
    "SpawnTool",
    "ToolCall",
    "TranscriptNotSaved",
    "TurnResult",
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
