"""JSONL session persistence for dsh: one transcript file per session, located without side effects."""

from ._backend import HEADER_TYPE, KIND, JsonlConfig, JsonlPersistence, plugin
from ._paths import escape_cwd, session_path

__all__ = ["HEADER_TYPE", "KIND", "JsonlConfig", "JsonlPersistence", "escape_cwd", "plugin", "session_path"]
