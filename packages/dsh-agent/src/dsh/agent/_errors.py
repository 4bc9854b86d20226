"""Errors of the agent and its verbs, each with its subject as attributes beside a one-sentence message.

DshError (dsh.core)
├── UsageError (ValueError)   .option, .value: an option (or the command after ``--``) is missing or out of range
├── ScriptError               .path, .subagent: a model script cannot be read or validated, or lacks a subagent
├── MissingPluginError        .deployment, .plugin: the deployment loads no plugin the verb needs
├── ServeError                .path: the socket ``dsh serve`` would listen on is held by a live server
└── TranscriptNotSaved        .session_id, .cause, .result: a turn ran to its end but its flush failed

Exception (builtin)
└── WireError (in ``_wire``)   a frame between ``dsh exec`` and ``dsh serve`` is oversized, truncated or malformed

``WireError`` is not a ``DshError``, and lives in ``_wire``: the served ``dsh exec`` client imports
only the standard library and ``dsh.paths`` (a ``DshError`` base would load the kernel on its
start-up path), and no ``WireError`` reaches a user as an exception: every site that can get one
turns it into an answer to the peer or a failure sentence of its own. A failure with no subject
(an internal invariant broken) stays a plain ``DshError``.
"""

from __future__ import annotations

from dsh.core import DshError

from ._wire import WireError

__all__ = ["MissingPluginError", "ScriptError", "ServeError", "TranscriptNotSaved", "UsageError", "WireError"]


class UsageError(DshError, ValueError):
    """A command-line option, or the command after ``--``, is missing or out of range."""

    def __init__(self, message: str, *, option: str, value: object = None) -> None:
        super().__init__(message)
        self.option = option
        """The option at fault as a user types it (``--timeout``; ``--`` for the command itself)."""
        self.value = value
        """The rejected value, as given (None when the option is missing)."""


class ScriptError(DshError):
    """A model script (``--script``) cannot be read or validated, or names no such subagent."""

    def __init__(self, message: str, *, path: str | None = None, subagent: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        """The script file at fault, when known."""
        self.subagent = subagent
        """The subagent type the script does not define, when that is the fault."""


class MissingPluginError(DshError):
    """The deployment loads no plugin that the verb needs."""

    def __init__(self, message: str, *, deployment: str, plugin: str) -> None:
        super().__init__(message)
        self.deployment = deployment
        """The deployment (its file, or the built-in one) that lacks the plugin."""
        self.plugin = plugin
        """The plugin's id."""


class ServeError(DshError):
    """``dsh serve`` cannot listen: a live server holds its socket."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
        """The socket path."""


class TranscriptNotSaved(DshError):
    """A turn ran to its end but its flush failed; ``result`` keeps what the turn produced."""

    def __init__(self, session_id: str, cause: BaseException, result: object) -> None:
        super().__init__(f"the transcript of session {session_id} could not be saved: {cause}")
        self.session_id = session_id
        """The session whose transcript lacks the turn."""
        self.cause = cause
        """The exception the flush raised."""
        self.result = result
        """What the turn produced (a ``TurnResult``), so a caller can still report the command's output."""
