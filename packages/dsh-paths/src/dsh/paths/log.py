"""dsh's library log, imported only when something is logged.

dsh's packages log through :func:`logger`, so a command that logs nothing never imports
:mod:`logging` (tens of milliseconds of a cold ``dsh`` start on a slow machine). The ``dsh`` command
calls :func:`configure_command` once: with ``--debug`` the log goes to stderr; without, the library's
log stays silent, because the command prints its own one-line reports and a second copy of each would
only repeat them. A program embedding dsh configures :mod:`logging` as it likes and never calls it.

Python warnings are part of that log for the command: :func:`capture_warnings` (the command's first
step, before any dependency imports) sends every warning a library raises (a deprecation that
``import asyncssh`` triggers, a ``ResourceWarning``) to the logger ``py.warnings`` instead of stderr,
so they are shown with ``--debug`` and never mixed into the command's one-line reports. The warnings
filters stay Python's (``-W``, ``PYTHONWARNINGS``): they decide whether a warning is raised (``-W
error`` still makes one an exception), this decides only where a shown one goes.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # no typing at import: the fenced start of the `dsh` command imports this module
    import logging
    from typing import TextIO

_command_level: int | None = None
"""The root level the ``dsh`` command asked for (``logging.DEBUG`` or ``logging.CRITICAL``), if it did."""

_DEBUG, _WARNING, _CRITICAL = 10, 30, 50  # logging's DEBUG, WARNING, CRITICAL: part of its documented API

_held: list[str] | None = None
"""Warnings shown after :func:`capture_warnings` and before :func:`configure_command` said where they go."""


def configure_command(*, debug: bool) -> None:
    """How the ``dsh`` command shows the library's log: all of it with ``--debug``, else none of it."""
    global _command_level
    global _held
    _command_level = _DEBUG if debug else _CRITICAL
    if debug or "logging" in sys.modules:
        _apply()
    held, _held = _held or [], None
    for text in held:  # raised while the command started, before it knew whether --debug was given
        _log_warning_text(text)


def capture_warnings() -> None:
    """Send every Python warning to the library log (``py.warnings``), never straight to stderr.

    The ``dsh`` command's policy, installed first thing (``dsh.cli._fast.run``): a dependency's
    warning is the library's business, shown with ``--debug`` and otherwise silent, like the rest of
    the log. Warnings shown before :func:`configure_command` are held until it runs. A program
    embedding dsh never calls this: its warnings go where it decides.
    """
    import warnings

    global _held
    if _command_level is None and _held is None:
        _held = []
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
    import warnings

    text = warnings.formatwarning(message, category, filename, lineno, line)
    if file is not None:  # an explicit destination (``warnings.showwarning(..., file=f)``) is the caller's choice
        file.write(text)
    elif _command_level is None and _held is not None:
        _held.append(text.rstrip())
    else:
        _log_warning_text(text.rstrip())


def _log_warning_text(text: str) -> None:
    if _command_level is not None and _command_level > _WARNING:
        return  # silent without --debug: logging need not even be imported
    logger("py.warnings").warning("%s", text)


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
