"""The dsh agent loop as a library: the agent, the model protocol, turns, subagents, the scripted model.

The ``dsh`` command, ``dsh serve`` and the default deployment are the ``dsh-cli`` distribution's
(``dsh.cli``); this package knows nothing of command lines.

The records of model-driven turns (``ModelStep``, ``TurnResult``) and scripts (``Script``,
``ScriptTurn``, ``load_script``, validated by pydantic) resolve on first use: a ``dsh exec`` runs one
tool call and no model step, and never pays for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._builtins import BUILTINS
from ._conversation import MISSING_RESULT, Answered, Outcome, Said, conversation, unknown_outcome
from ._errors import ModelError, ScriptError, TranscriptNotSaved, TurnError, unsaved_message
from ._hookseam import HOOKS, ONE_CALL_POINTS, STOP_BLOCK_CAP, HookRecord, HookScope, HookVerdict, LoopHooks, Notice
from ._loop import Agent, needs_event_loop
from ._model import MODEL, Model, ScriptedModel, ToolCall, check_model, load_model
from ._observe import OBSERVER_GROUP, OBSERVERS, Observer, Observers, Span, observers_plugin
from ._provider import NO_KEY, provider_error, read_key, server_message, status_reason
from ._spawn import SPAWN_DESCRIPTION, SpawnTool, spawn_plugin

if TYPE_CHECKING:
    from ._outside import Turn
    from ._script import Script, ScriptTurn, load_script
    from ._steps import ModelStep, TurnResult

_LAZY = {
    "Script": "_script",
    "ScriptTurn": "_script",
    "load_script": "_script",
    "ModelStep": "_steps",
    "Turn": "_outside",
    "TurnResult": "_steps",
}

__all__ = [
    "BUILTINS",
    "HOOKS",
    "MISSING_RESULT",
    "MODEL",
    "NO_KEY",
    "OBSERVERS",
    "OBSERVER_GROUP",
    "ONE_CALL_POINTS",
    "SPAWN_DESCRIPTION",
    "STOP_BLOCK_CAP",
    "Agent",
    "Answered",
    "HookRecord",
    "HookScope",
    "HookVerdict",
    "LoopHooks",
    "Model",
    "ModelError",
    "ModelStep",
    "Notice",
    "Observer",
    "Observers",
    "Outcome",
    "Said",
    "Script",
    "ScriptError",
    "ScriptTurn",
    "ScriptedModel",
    "Span",
    "SpawnTool",
    "ToolCall",
    "TranscriptNotSaved",
    "Turn",
    "TurnError",
    "TurnResult",
    "check_model",
    "conversation",
    "load_model",
    "load_script",
    "needs_event_loop",
    "observers_plugin",
    "provider_error",
    "read_key",
    "server_message",
    "spawn_plugin",
    "status_reason",
    "unknown_outcome",
    "unsaved_message",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        return getattr(importlib.import_module(f".{module}", __name__), name)
    raise AttributeError(f"module 'dsh.agent' has no attribute {name!r}")
