"""Sessions for dsh: headers, events, the persistence seam, the session store and the tool contract."""

from ._model import (
    EVENT_TYPES,
    FORMAT_VERSION,
    MAX_ID_LENGTH,
    InvalidSessionIdError,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    new_session_id,
    validate_session_id,
)
from ._persistence import (
    PERSISTENCE_GROUP,
    SESSION_PERSISTENCE,
    PersistenceError,
    SessionLockedError,
    SessionNotFoundError,
    SessionPersistence,
    StoredSession,
)
from ._store import SESSIONS, Session, SessionStore, sessions_plugin
from ._tools import TOOLS, AgentRef, Tool, ToolError, ToolExecution, ToolRegistry, ToolResult, ToolSpec, tools_plugin

__all__ = [
    "EVENT_TYPES",
    "FORMAT_VERSION",
    "MAX_ID_LENGTH",
    "PERSISTENCE_GROUP",
    "SESSIONS",
    "SESSION_PERSISTENCE",
    "TOOLS",
    "AgentRef",
    "InvalidSessionIdError",
    "PersistenceError",
    "Session",
    "SessionEvent",
    "SessionHeader",
    "SessionLocation",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionPersistence",
    "SessionStore",
    "StoredSession",
    "Tool",
    "ToolError",
    "ToolExecution",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "new_session_id",
    "sessions_plugin",
    "tools_plugin",
    "validate_session_id",
]
