"""Sessions for dsh: headers, events, the persistence seam, the session store and the tool contract."""

from ._errors import (
    ForkError,
    InvalidSessionIdError,
    PersistenceError,
    SessionLockedError,
    SessionNotFoundError,
    ToolError,
)
from ._model import (
    EVENT_TYPES,
    FORMAT_VERSION,
    MAX_ID_LENGTH,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    new_session_id,
    storable,
    validate_session_id,
)
from ._persistence import (
    PERSISTENCE_GROUP,
    SESSION_PERSISTENCE,
    ScanningPersistence,
    SessionPersistence,
    SessionScan,
    StoredSession,
)
from ._store import SESSIONS, Session, SessionStore, sessions_plugin
from ._tools import TOOLS, AgentRef, Tool, ToolExecution, ToolRegistry, ToolResult, ToolSpec, tools_plugin

__all__ = [
    "EVENT_TYPES",
    "FORMAT_VERSION",
    "MAX_ID_LENGTH",
    "PERSISTENCE_GROUP",
    "SESSIONS",
    "SESSION_PERSISTENCE",
    "TOOLS",
    "AgentRef",
    "ForkError",
    "InvalidSessionIdError",
    "PersistenceError",
    "ScanningPersistence",
    "Session",
    "SessionEvent",
    "SessionHeader",
    "SessionLocation",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionPersistence",
    "SessionScan",
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
    "storable",
    "tools_plugin",
    "validate_session_id",
]
