"""dsh's library log, imported only when something is logged.

dsh's packages log through :func:`logger`, so a command that logs nothing never imports
:mod:`logging` (tens of milliseconds of a cold ``dsh`` start on a slow machine). The ``dsh`` command
calls :func:`configure_command` once: with ``--debug`` the log goes to stderr; without, the library's
log stays silent, because the command prints its own one-line reports and a second copy of each would
only repeat them. A program embedding dsh configures :mod:`logging` as it likes and never calls it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

_command_level: int | None = None
"""The root level the ``dsh`` command asked for (``logging.DEBUG`` or ``logging.CRITICAL``), if it did."""

_DEBUG, _CRITICAL = 10, 50  # logging.DEBUG and logging.CRITICAL, which are part of its documented API


def configure_command(*, debug: bool) -> None:
    """How the ``dsh`` command shows the library's log: all of it with ``--debug``, else none of it."""
    global _command_level
    _command_level = _DEBUG if debug else _CRITICAL
    if debug or "logging" in sys.modules:
        _apply()


def logger(name: str) -> logging.Logger:
    """The logger ``name`` (``dsh.hooks``, ...), with the command's configuration applied first."""
    import logging

    if _command_level is not None:
        _apply()
    return logging.getLogger(name)


def adopt(name: str) -> None:
    """Make another library's logger ``name`` follow the ``dsh`` command's choice (a no-op outside the command).

    For a library that logs to :mod:`logging` itself and sets its own level (psycopg sets ``psycopg``
    to WARNING), which the root level alone would not override: its lines would reach stderr with
    the command's own reports. A program embedding dsh keeps its configuration.
    """
    if _command_level is None:
        return
    import logging

    _apply()
    logging.getLogger(name).setLevel(_command_level)


def _apply() -> None:
    import logging

    # A no-op once the root logger has a handler: a program's own configuration always wins.
    logging.basicConfig(level=_command_level, format="dsh: %(name)s: %(message)s")
