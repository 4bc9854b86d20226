"""dsh's library log: the loggers of dsh's packages, silent or shown as the ``dsh`` command asks.

dsh's packages log through :func:`logger`. The ``dsh`` command calls :func:`configure_command` once:
with ``--debug`` the log goes to stderr; without, the library's log stays silent, because the command
prints its own one-line reports and a second copy of each would only repeat them. A program embedding
dsh configures :mod:`logging` as it likes and never calls it.
"""

from __future__ import annotations

import logging

_command_level: int | None = None
"""The root level the ``dsh`` command asked for (``logging.DEBUG`` or ``logging.CRITICAL``), if it did."""


def configure_command(*, debug: bool) -> None:
    """How the ``dsh`` command shows the library's log: all of it with ``--debug``, else none of it."""
    global _command_level
    _command_level = logging.DEBUG if debug else logging.CRITICAL
    # A no-op once the root logger has a handler: a program's own configuration always wins.
    logging.basicConfig(level=_command_level, format="dsh: %(name)s: %(message)s")


def logger(name: str) -> logging.Logger:
    """The logger ``name`` (``dsh.hooks``, ...)."""
    return logging.getLogger(name)


def adopt(name: str) -> None:
    """Make another library's logger ``name`` follow the ``dsh`` command's choice (a no-op outside the command).

    For a library that logs to :mod:`logging` itself and sets its own level (psycopg sets ``psycopg``
    to WARNING), which the root level alone would not override: its lines would reach stderr with
    the command's own reports. A program embedding dsh keeps its configuration.
    """
    if _command_level is not None:
        logging.getLogger(name).setLevel(_command_level)
