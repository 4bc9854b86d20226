"""Sessions for dsh: headers, events, the session store and the tool contract.

Also the two facts every record and every home-taking plugin shares: :data:`EMPTY_MAPPING` (the
read-only default of a record's mapping field) and the deployment's harness home, :data:`DSH_HOME`
and :func:`plugin_home`.

The persistence seam (what a backend implements) is :mod:`dsh.session.persistence`.
"""

from ._empty import EMPTY_MAPPING, ReadOnlyDict
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
from ._home import DSH_HOME, plugin_home
from ._model import SessionEvent, SessionHeader, SessionLocation
from ._rules import is_safe_id, sanitise_claim, validate_session_id
from ._schema import anthropic_tool, drop_nulls, openai_tool, strict_problems, strict_schema
from ._session import Session
from ._store import SESSIONS, SessionStore, sessions_plugin
from ._tools import TOOLS, AgentRef, Tool, ToolExecution, ToolResult, ToolSpec, tools_plugin

__all__ = [
    "DSH_HOME",
    "EMPTY_MAPPING",
    "SESSIONS",
    "TOOLS",
    "AgentRef",
    "FlushUnconfirmedError",
    "ForkError",
    "InvalidSessionIdError",
    "PersistenceError",
    "ReadOnlyDict",
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
    "plugin_home",
    "sanitise_claim",
    "sessions_plugin",
    "strict_problems",
    "strict_schema",
    "tools_plugin",
    "validate_session_id",
]
