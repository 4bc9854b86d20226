"""The hooks layer's error, with its subject as attributes.

DshError (dsh.core)
└── PluginError (dsh.core)   .plugin
    └── HookConfigError      .source, .path: a hooks file or inline table that cannot be used
"""

from __future__ import annotations

from dsh.core import PluginError


class HookConfigError(PluginError):
    """A hooks file (or inline table) is untrusted, unreadable, not JSON or malformed; the plugin fails."""

    def __init__(self, message: str, *, source: str, path: str | None = None) -> None:
        super().__init__(message)
        self.source = source
        """What the message names: ``<dialect> hooks file /path`` or ``<dialect> hooks (inline)``."""
        self.path = path
        """The file at fault, when the table came from one."""
