"""JSONL session persistence for dsh: one transcript file per session, located without side effects."""

from ._backend import KIND, JsonlPersistence
from ._format import FLUSH_TYPE, HEADER_TYPE, LAYOUT
from ._paths import escape_cwd, session_path
from ._plugin import JsonlConfig, plugin

__all__ = [
    "FLUSH_TYPE",
    "HEADER_TYPE",
    "KIND",
    "LAYOUT",
    "JsonlConfig",
    "JsonlPersistence",
    "escape_cwd",
    "plugin",
    "session_path",
]
