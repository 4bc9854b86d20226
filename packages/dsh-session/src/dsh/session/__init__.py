"""Sessions for dsh: headers, events, the session store and the tool contract.

The persistence seam (what a backend implements) is :mod:`dsh.session.persistence`.
"""

from ._errors import (
    FlushUnconfirmedError,
    ForkError,
    InvalidSessionIdError,
    PersistenceError,
    SchemaError,
    SessionFormatError,
    SessionLockedError,
    SessionNotFoundError,
    ToolError,
)
from ._model import SessionEvent, SessionHeader, SessionLocation
from ._rules import is_safe_id, validate_session_id
from ._schema import anthropic_tool, drop_nulls, openai_tool, strict_problems, strict_schema
from ._session import Session
from ._store import SESSIONS, SessionStore, sessions_plugin
from ._tools import TOOLS, AgentRef, Tool, ToolExecution, ToolResult, ToolSpec, tools_plugin

__all__ = [
    "SESSIONS",
    "TOOLS",
    "AgentRef",
    "FlushUnconfirmedError",
    "ForkError",
    "InvalidSessionIdError",
    "PersistenceError",
    "SchemaError",
    "Session",
    "SessionEvent",
    "SessionFormatError",
    "SessionHeader",
    "SessionLocation",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionStore",
    "Tool",
    "ToolError",
    "ToolExecution",
    "ToolResult",
    "ToolSpec",
    "anthropic_tool",
    "drop_nulls",
    "is_safe_id",
    "openai_tool",
    "sessions_plugin",
    "strict_problems",
    "strict_schema",
    "tools_plugin",
    "validate_session_id",
]
