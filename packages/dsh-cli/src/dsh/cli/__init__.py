"""The ``dsh`` command: its verbs, ``dsh serve`` and its client, the wire protocol.

The embedding front door (``Harness``), the default deployment and ``open_runtime`` are the
dsh-harness library's (``dsh.harness``), which this command is built on. The console script's
start-up path, fenced, is the package ``dsh.cli_fast`` beside this one: a served ``dsh exec``
never imports this package.
"""

from ._commands import COMMANDS_GROUP, Command
from ._errors import MissingPluginError, ServeError, UsageError

__all__ = [
    "COMMANDS_GROUP",
    "Command",
    "MissingPluginError",
    "ServeError",
    "UsageError",
]
