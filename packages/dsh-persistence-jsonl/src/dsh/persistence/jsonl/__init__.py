"""JSONL session persistence for dsh: one transcript file per session, located without side effects."""

from ._backend import FLUSH_TYPE, HEADER_TYPE, KIND, LAYOUT, JsonlConfig, JsonlPersistence, plugin
from ._paths import escape_cwd, session_path

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
