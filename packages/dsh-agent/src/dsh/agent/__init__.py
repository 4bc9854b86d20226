"""The dsh agent loop as a library: the agent, the model protocol, turns, subagents, the scripted model.

The ``dsh`` command, ``dsh serve`` and the default deployment are the ``dsh-cli`` distribution's
(``dsh.cli``); this package knows nothing of command lines.

Two public submodules hold what a one-shot ``dsh exec`` never needs, imported by what uses them:
:mod:`dsh.agent.outside` (``Turn``, a turn driven from an outside loop, under asyncio) and
:mod:`dsh.agent.script` (``Script``, ``ScriptTurn``, ``load_script``: scripts of the keyless model,
validated by pydantic).
"""

from ._builtins import BUILTINS
from ._conversation import MISSING_RESULT, Answered, Outcome, Said, conversation, unknown_outcome
from ._errors import ModelError, ScriptError, TranscriptNotSaved, TurnError, unsaved_message
from ._hookseam import HOOKS, ONE_CALL_POINTS, STOP_BLOCK_CAP, HookRecord, HookScope, HookVerdict, LoopHooks, Notice
from ._loop import Agent, needs_event_loop
from ._model import MODEL, Model, ScriptedModel, ToolCall, check_model, load_model
from ._observe import OBSERVER_GROUP, OBSERVERS, Observer, Observers, Span, observers_plugin
from ._provider import NO_KEY, provider_error, read_key, server_message, status_reason
from ._spawn import SPAWN_DESCRIPTION, SpawnTool, spawn_plugin
from ._steps import ModelStep, TurnResult

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
    "ScriptError",
    "ScriptedModel",
    "Span",
    "SpawnTool",
    "ToolCall",
    "TranscriptNotSaved",
    "TurnError",
    "TurnResult",
    "check_model",
    "conversation",
    "load_model",
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
