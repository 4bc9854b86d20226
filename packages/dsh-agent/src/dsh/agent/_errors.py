"""Errors of the agent loop, each with its subject as attributes beside a one-sentence message.

DshError (dsh.core)
├── ScriptError               .path, .subagent: a model script cannot be read or validated, or lacks a subagent
├── TranscriptNotSaved        .session_id, .cause, .result: a turn ran to its end but its flush failed
└── TurnError                 .turn_id: an outside loop's turn used when not open, or blocked or stopped by a hook

The ``dsh`` command's own errors (usage, serve, missing plugins, wire frames) live in ``dsh.cli``.
"""

from __future__ import annotations

from dsh.core import DshError

__all__ = ["ScriptError", "TranscriptNotSaved", "TurnError"]


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
