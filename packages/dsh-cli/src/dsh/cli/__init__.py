"""The ``dsh`` command: its verbs, ``dsh serve`` and its client, the wire protocol.

The embedding front door (``Harness``), the default deployment and ``open_runtime`` are the
dsh-harness library's (``dsh.harness``), which this command is built on.

Exports resolve lazily: the served ``dsh exec`` imports this package on its start-up path and needs
none of them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: importing it is a measurable part of a served `dsh exec`
if TYPE_CHECKING:
    from typing import Any

    from ._commands import COMMANDS_GROUP, Command
    from ._errors import MissingPluginError, ServeError, UsageError

_EXPORTS = {
    "COMMANDS_GROUP": "._commands",
    "Command": "._commands",
    "MissingPluginError": "._errors",
    "ServeError": "._errors",
    "UsageError": "._errors",
}

__all__ = [
    "COMMANDS_GROUP",
    "Command",
    "MissingPluginError",
    "ServeError",
    "UsageError",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsh.cli' has no attribute {name!r}")
    import importlib  # here, not at the top: the served `dsh exec` client never needs it

    return getattr(importlib.import_module(module, __name__), name)
