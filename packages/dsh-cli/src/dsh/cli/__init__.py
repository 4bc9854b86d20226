"""The ``dsh`` command: its verbs, ``dsh serve`` and its client, the wire protocol, the default deployment.

Exports resolve lazily: the served ``dsh exec`` imports this package on its start-up path and needs
none of them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: importing it is a measurable part of a served `dsh exec`
if TYPE_CHECKING:
    from typing import Any

    from ._commands import COMMANDS_GROUP, Command
    from ._errors import MissingPluginError, ServeError, UsageError
    from ._exec import notice_line
    from ._harness import Harness, HarnessSession, HarnessTurn
    from ._runtime import DEFAULT_SOURCE, default_deployment, open_runtime

_EXPORTS = {
    "COMMANDS_GROUP": "._commands",
    "Command": "._commands",
    "Harness": "._harness",
    "HarnessSession": "._harness",
    "HarnessTurn": "._harness",
    "MissingPluginError": "._errors",
    "ServeError": "._errors",
    "UsageError": "._errors",
    "notice_line": "._exec",
    "DEFAULT_SOURCE": "._runtime",
    "default_deployment": "._runtime",
    "open_runtime": "._runtime",
}

__all__ = [
    "COMMANDS_GROUP",
    "DEFAULT_SOURCE",
    "Command",
    "Harness",
    "HarnessSession",
    "HarnessTurn",
    "MissingPluginError",
    "ServeError",
    "UsageError",
    "default_deployment",
    "notice_line",
    "open_runtime",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsh.cli' has no attribute {name!r}")
    import importlib  # here, not at the top: the served `dsh exec` client never needs it

    return getattr(importlib.import_module(module, __name__), name)
