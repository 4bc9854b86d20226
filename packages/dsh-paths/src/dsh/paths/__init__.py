"""Resolution of the dsh harness home (``DSH_HOME``).

The precedence is a contract: an explicitly configured value, else the ``DSH_HOME``
environment variable (a blank value counts as unset), else ``~/.dsh``. The result is
always absolute with ``~`` expanded. Resolution is pure: it creates nothing.

:func:`ensure_private_dir`, :func:`check_trusted`, :func:`open_trusted`, :func:`read_trusted_text` and
:func:`create_private_file` are the one trust rule every consumer of the home applies (see ``_trust``),
and :func:`trust_fault` that rule on owner and mode, judged on a status, for every other check;
:func:`open_regular` and :func:`read_regular_text` the one safe way to open a file someone could
replace by a FIFO (see ``_read``). :data:`INTERRUPTS` and :mod:`dsh.paths.signals` own the process's
signals (see there). :func:`seal_process` keeps a long-lived server's commands out of it (``_seal``).
"""

from __future__ import annotations

import os

from ._errors import NotRegularFileError, UntrustedPathError
from ._read import open_regular, read_regular_text
from ._seal import seal_process
from ._trust import (
    check_trusted,
    create_private_file,
    ensure_private_dir,
    open_trusted,
    read_trusted_text,
    trust_fault,
    trusted_paths,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # neither typing nor pathlib at import: a served `dsh exec` reads the home before anything else
    from collections.abc import Mapping
    from pathlib import Path

__all__ = [
    "DEFAULT_HOME",
    "DEPLOYMENT_ENV",
    "HOME_ENV",
    "INTERRUPTS",
    "NotRegularFileError",
    "UntrustedPathError",
    "check_trusted",
    "create_private_file",
    "ensure_private_dir",
    "home_text",
    "open_regular",
    "open_trusted",
    "read_regular_text",
    "read_trusted_text",
    "resolve_dsh_home",
    "seal_process",
    "trust_fault",
    "trusted_paths",
]

HOME_ENV = "DSH_HOME"
"""The environment variable consulted when no home is configured."""

DEFAULT_HOME = "~/.dsh"
"""The home used when neither configuration nor environment names one."""

DEPLOYMENT_ENV = "DSH_DEPLOYMENT"
"""The environment variable naming the deployment file: the ``dsh`` command reads it when no
``--deployment`` is given, and dsh sets it in the shells of a harness whose deployment is a file.
Here, below every distribution, because both the fenced start-up path and bash-env (which keeps it
dsh's own: no plugin may declare it) name it."""

INTERRUPTS = (
    "SIGINT",
    "SIGTERM",
    "SIGHUP",
    "SIGQUIT",
    "SIGUSR1",
    "SIGUSR2",
    "SIGALRM",
    "SIGVTALRM",
    "SIGPROF",
    "SIGXCPU",
    "SIGPWR",
    "SIGIO",
    "SIGSTKFLT",
)
"""Signals that interrupt ``dsh exec``, ``dsh run`` and ``dsh serve`` (the command's group is killed, the
turn flushed as interrupted), and whose handlers containment watches: the one list, here because the
served client (which imports nothing above this package) reads it too, at no cost. Every signal whose
default action ends a process and that someone else sends, as names (this platform has some of
them); not SIGKILL (uncatchable), the faults a process raises on itself (SIGSEGV, SIGBUS, SIGFPE,
SIGILL, SIGABRT, SIGSYS, SIGTRAP: nothing can go on after them), real-time signals, nor SIGPIPE and
SIGXFSZ, which Python ignores. Handlers are set through :mod:`dsh.paths.signals`."""


def resolve_dsh_home(
    configured: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """Return the absolute harness home for ``configured`` under ``env``.

    ``env`` defaults to :data:`os.environ`. ``~`` expands against the ``HOME`` of ``env``
    when it has one, so a caller resolving for another environment gets that user's home.
    """
    import pathlib

    return pathlib.Path(home_text(configured, env))


def home_text(
    configured: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """:func:`resolve_dsh_home` as a string, for callers that must not pay for :mod:`pathlib`."""
    environ = os.environ if env is None else env
    raw: str | None = None
    if configured is not None and str(configured).strip():
        raw = os.fspath(configured)
    else:
        from_env = environ.get(HOME_ENV, "")
        raw = from_env if from_env.strip() else DEFAULT_HOME
    if raw == "~" or raw.startswith("~/"):
        user_home = environ.get("HOME") or os.path.expanduser("~")
        raw = user_home + raw[1:]
    else:
        raw = os.path.expanduser(raw)
    return os.path.abspath(raw)
