"""Python warnings while the ``dsh`` command starts: held until the command says where they go.

No library warning reaches the command's stderr (issue 38): a dependency's deprecation notice
(``import asyncssh`` under a newer cryptography) is the library log's, silent unless ``--debug``.
Whether ``--debug`` was given is known only once the line is read, and a served ``dsh exec``
never reads it, so from the first instruction (:func:`hold`, in ``_fast.run``) until then
warnings are kept here; ``dsh.cli._cli.dispatch`` hands them to the log
(``dsh.paths.log.capture_warnings(released())``), which takes every later one too. A served
client drops what it held: its line runs in the server, and without ``--debug``.

Here, in the fence, so that ``dsh.paths.log`` stays ordinary Python (``logging`` imported with it):
the served client must not pay for :mod:`logging` (about as much as its own start-up, measured).
"""

from __future__ import annotations

import warnings

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from typing import TextIO

_held: list[str] = []


def hold() -> None:
    """Keep every warning shown from now on (:func:`warnings.showwarning`) until :func:`released`."""
    warnings.showwarning = _hold


def _hold(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    text = warnings.formatwarning(message, category, filename, lineno, line)
    if file is not None:  # an explicit destination (``warnings.showwarning(..., file=f)``) is the caller's choice
        file.write(text)
    else:
        _held.append(text.rstrip())


def released() -> list[str]:
    """The warnings held so far, given up: the caller decides where they, and later ones, go."""
    held = _held[:]
    _held.clear()
    return held
