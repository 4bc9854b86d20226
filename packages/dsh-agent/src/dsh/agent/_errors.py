"""Errors of the agent loop, each with its subject as attributes beside a one-sentence message.

DshError (dsh.core)
├── ModelError                .provider, .base_url, .status: a model provider failed a step, or is not a Model
├── ScriptError               .path, .subagent: a model script cannot be read or validated, or lacks a subagent
├── TranscriptNotSaved        .session_id, .cause, .result: a turn ran to its end but its flush failed
└── TurnError                 .turn_id: an outside loop's turn used when not open, or blocked or stopped by a hook

The ``dsh`` command's own errors (usage, serve, missing plugins, wire frames) live in ``dsh.cli``.
"""

from __future__ import annotations

from dsh.core import DshError

__all__ = ["ModelError", "ScriptError", "TranscriptNotSaved", "TurnError"]


class ModelError(DshError):
    """A model provider failed a step (a refused key, a rate limit, a server error, a timeout, a
    reply dsh cannot read), or what it produced is not a :class:`~dsh.agent.Model`.

    The message is one sentence naming the provider and, for a remote one, its base URL; never a key.
    """

    def __init__(self, message: str, *, provider: str, base_url: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        """The provider at fault (its entry-point name, or a description of who produced the model)."""
        self.base_url = base_url
        """The endpoint the provider talked to, when it is remote."""
        self.status = status
        """The HTTP status the endpoint answered with, when it answered."""


class ScriptError(DshError):
    """A model script (``--script``) cannot be read or validated, or names no such subagent."""

    def __init__(self, message: str, *, path: str | None = None, subagent: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        """The script file at fault, when known."""
        self.subagent = subagent
        """The subagent type the script does not define, when that is the fault."""


def unsaved_message(session_id: str, cause: BaseException) -> str:
    """The one sentence for a flush that failed after the command ran: "could not", or "may not" when unconfirmed."""
    from dsh.session import FlushUnconfirmedError

    verb = "may not have been saved" if isinstance(cause, FlushUnconfirmedError) else "could not be saved"
    return f"the transcript of session {session_id} {verb}: {cause}"


class TranscriptNotSaved(DshError):
    """A turn ran to its end but its flush failed; ``result`` keeps what the turn produced."""

    def __init__(self, session_id: str, cause: BaseException, result: object) -> None:
        super().__init__(unsaved_message(session_id, cause))
        self.session_id = session_id
        """The session whose transcript lacks the turn."""
        self.cause = cause
        """The exception the flush raised."""
        self.result = result
        """What the turn produced (a ``TurnResult``), so a caller can still report the command's output."""


class TurnError(DshError):
    """An outside loop used a turn it may not: not entered yet, already ended, or blocked or stopped by a hook."""

    def __init__(self, message: str, *, turn_id: str | None = None) -> None:
        super().__init__(message)
        self.turn_id = turn_id
        """The turn at fault, once it had an id."""
