"""The dsh agent: the loop, the keyless scripted model, subagents, the default deployment and ``dsh``."""

from ._loop import SPAWN_DESCRIPTION, Agent, SpawnTool, TurnResult, spawn_plugin
from ._model import Model, ModelStep, Script, ScriptedModel, ScriptTurn, ToolCall, load_script
from ._runtime import BUILTINS, DEFAULT_SOURCE, default_deployment, open_runtime

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
    "TurnResult",
    "default_deployment",
    "load_script",
    "open_runtime",
    "spawn_plugin",
]
