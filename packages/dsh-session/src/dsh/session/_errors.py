"""Errors of the session layer (and of every persistence backend), each with its subject as attributes.

DshError (dsh.core)
├── InvalidSessionIdError (ValueError)     .session_id: an id that would be unsafe in a path or a shell
├── SessionFormatError (ValueError)        .field, .session_id: a header, event or location breaks a rule of its format
├── PersistenceError                       .session_id: a backend could not read or write (None: not one session's)
│   ├── SessionNotFoundError (LookupError) .session_id: no stored session has the id
│   ├── SessionLockedError                 .session_id: another writer holds the session
│   └── FlushUnconfirmedError              .session_id: a flush was sent but whether it was stored is unknown
├── ForkError                              .session_id, .upto: a fork boundary outside the session
└── ToolError                              .tool: a tool call failed (tools subclass it: tool-bash's ArgumentError)
    └── SchemaError                        .tool, .path: a tool's argument schema cannot take the asked-for shape
"""

from __future__ import annotations

from dsh.core import DshError


class InvalidSessionIdError(DshError, ValueError):
    """A session id would be unsafe in a path or a shell."""

    def __init__(self, message: str, *, session_id: object = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        """The rejected value, as given."""


class SessionFormatError(DshError, ValueError):
    """A session header, event or location (given, or read back from a store) breaks a rule of its format.

    The message is one sentence naming the field, prefixed with the session when its id is known:
    ``session s1: field 'cwd' must be an absolute path, not 'work'``.
    """

    def __init__(self, problem: str, *, field: str | None, session_id: str | None = None) -> None:
        super().__init__(f"session {session_id}: {problem}" if session_id else problem)
        self.problem = problem
        """The sentence about the field alone (for callers that name the session themselves)."""
        self.field = field
        """The field at fault (``None``: the record as a whole, say it is not a JSON object)."""
        self.session_id = session_id
        """The session the record belongs to, when its id was read before the fault."""


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

    REMEDY = (
        "wait until that writer lets it go (a dsh exec when its turn ends; a dsh mcp connection, a dsh run "
        "or an open harness session when it closes) or use another session"
    )
    """What every backend's message ends with: who holds a session how long, and the way round it."""


class FlushUnconfirmedError(PersistenceError):
    """A flush was sent but the backend could not learn whether it was stored (its commit's reply was lost).

    The events stay buffered in the session, as after any failed flush; the backend settles the
    question at the session's next flush, storing them then only if they were not stored (never twice).
    """


class ForkError(DshError):
    """A fork boundary is outside the session it would fork."""

    def __init__(self, message: str, *, session_id: str, upto: int) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.upto = upto


class ToolError(DshError):
    """A tool call failed; a tool raises a subclass naming what is wrong (``dsh.tool_bash``'s ``ArgumentError``).

    A duplicate registration is not a ``ToolError``: the registry raises ``dsh.core``'s
    ``RegistrationConflictError`` (``.kind`` ``tool``, ``.key`` the name, ``.owner``).
    """

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool
        """The tool's name, when known."""


class SchemaError(ToolError):
    """A tool's argument schema cannot be exported in the shape asked for (OpenAI's strict mode, say)."""

    def __init__(self, message: str, *, tool: str | None = None, path: str = "") -> None:
        super().__init__(message, tool=tool)
        self.path = path
        """Where in the schema the fault is (``properties.env``; empty for the root)."""
