"""Errors of the session layer (and of every persistence backend), each with its subject as attributes.

DshError (dsh.core)
├── InvalidSessionIdError (ValueError)     .session_id: an id that would be unsafe in a path or a shell
├── PersistenceError                       .session_id: a backend could not read or write (None: not one session's)
│   ├── SessionNotFoundError (LookupError) .session_id: no stored session has the id
│   └── SessionLockedError                 .session_id: another writer holds the session
├── ForkError                              .session_id, .upto: a fork boundary outside the session
└── ToolError                              .tool: a tool cannot be registered or called
"""

from __future__ import annotations

from dsh.core import DshError


class InvalidSessionIdError(DshError, ValueError):
    """A session id would be unsafe in a path or a shell."""

    def __init__(self, message: str, *, session_id: object = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        """The rejected value, as given."""


class PersistenceError(DshError):
    """A backend could not read or write a session."""

    def __init__(self, message: str, *, session_id: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        """The session at fault, when the failure is one session's."""


class SessionNotFoundError(PersistenceError, LookupError):
    """No stored session has the requested id."""


class SessionLockedError(PersistenceError):
    """Another process (or another turn of this one) is writing the same session."""


class ForkError(DshError):
    """A fork boundary is outside the session it would fork."""

    def __init__(self, message: str, *, session_id: str, upto: int) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.upto = upto


class ToolError(DshError):
    """A tool cannot be registered or called."""

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool
        """The tool's name, when known."""
