"""dsh's library log.

dsh's packages log through :func:`logger`. The ``dsh`` command calls :func:`configure_command` once:
with ``--debug`` the log goes to stderr; without, the library's log stays silent, because the command
prints its own one-line reports and a second copy of each would only repeat them. A program
embedding dsh configures :mod:`logging` as it likes and never calls it.

Python warnings are part of that log for the command: :func:`capture_warnings` sends every warning a
library raises (a deprecation that ``import asyncssh`` triggers, a ``ResourceWarning``) to the logger
``py.warnings`` instead of stderr, so they are shown with ``--debug`` and never mixed into the
command's one-line reports. The warnings filters stay Python's (``-W``, ``PYTHONWARNINGS``): they
decide whether a warning is raised (``-W error`` still makes one an exception), this decides only
where a shown one goes. (The ``dsh`` command holds the warnings shown while it starts, before it
knows whether ``--debug`` was given, and hands them over here: ``capture_warnings(held)``.)
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from typing import TextIO

_command_level: int | None = None
"""The root level the ``dsh`` command asked for (``logging.DEBUG`` or ``logging.CRITICAL``), if it did."""


def configure_command(*, debug: bool) -> None:
    """How the ``dsh`` command shows the library's log: all of it with ``--debug``, else none of it."""
    global _command_level
    _command_level = logging.DEBUG if debug else logging.CRITICAL
    # A no-op once the root logger has a handler: a program's own configuration always wins.
    logging.basicConfig(level=_command_level, format="dsh: %(name)s: %(message)s")


def capture_warnings(held: Iterable[str] = ()) -> None:
    """Send every Python warning to the library log (``py.warnings``), never straight to stderr.

    ``held`` are warnings shown before this call, as :func:`warnings.formatwarning` wrote them: they
    are logged first. The ``dsh`` command's policy (``dsh.cli._cli.dispatch``, once the command line
    said whether ``--debug`` was given): a dependency's warning is the library's business, shown with
    ``--debug`` and otherwise silent, like the rest of the log. A program embedding dsh never calls
    this: its warnings go where it decides.
    """
    for text in held:
        logger("py.warnings").warning("%s", text)
    warnings.showwarning = _show_warning


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """:func:`warnings.showwarning` for the command: the log, unless a caller named a file itself."""
    text = warnings.formatwarning(message, category, filename, lineno, line)
    if file is not None:  # an explicit destination (``warnings.showwarning(..., file=f)``) is the caller's choice
        file.write(text)
    else:
        logger("py.warnings").warning("%s", text.rstrip())


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
