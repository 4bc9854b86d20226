"""Errors of the ``dsh`` command and its verbs, each with its subject as attributes beside a one-sentence message.

DshError (dsh.core)
├── UsageError (ValueError)   .option, .value: an option (or the command after ``--``) is missing or out of range
├── MissingPluginError        .deployment, .plugin: the deployment loads no plugin the verb needs
└── ServeError                .path: the socket ``dsh serve`` would listen on is held by a live server

Exception (builtin)
└── WireError (in ``_wire``)   a frame between ``dsh exec`` and ``dsh serve`` is oversized, truncated or malformed

``WireError`` is not a ``DshError``, and lives in ``_wire``: the served ``dsh exec`` client imports
only the standard library and ``dsh.paths`` (a ``DshError`` base would load the kernel on its
start-up path), and no ``WireError`` reaches a user as an exception: every site that can get one
turns it into an answer to the peer or a failure sentence of its own. The agent loop's errors
(``ScriptError``, ``TranscriptNotSaved``) are ``dsh.agent``'s.
"""

from __future__ import annotations

from dsh.cli_fast._wire import WireError
from dsh.core import DshError
from dsh.session import SessionNotFoundError

__all__ = ["MissingPluginError", "ServeError", "UsageError", "WireError", "not_found_hint"]


def not_found_hint(exc: BaseException) -> str:
    """Where to look for a session the deployment does not hold (sessions stay in the store that recorded
    them), to follow its failure sentence; in-process and served alike."""
    if isinstance(exc, SessionNotFoundError):
        return "; `dsh sessions list` lists the sessions of this deployment and DSH_HOME"
    return ""


class UsageError(DshError, ValueError):
    """A command-line option, or the command after ``--``, is missing or out of range."""

    def __init__(self, message: str, *, option: str, value: object = None) -> None:
        super().__init__(message)
        self.option = option
        """The option at fault as a user types it (``--timeout``; ``--`` for the command itself)."""
        self.value = value
        """The rejected value, as given (None when the option is missing)."""


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
