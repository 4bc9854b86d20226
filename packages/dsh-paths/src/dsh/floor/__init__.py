"""The standard-library floor every dsh process stands on, paths as text.

Where the home is (:func:`home_text`, :func:`relative_home`), which deployment is in effect
(:func:`deployment_in_effect`), the one trust rule for what dsh keeps in its home
(:func:`check_trusted`, :func:`open_trusted`, :func:`read_trusted_text`, :func:`ensure_private_dir`,
:func:`create_private_file`, :func:`trust_fault`, :func:`trusted_paths`; see ``_trust``), the one
safe way to open a file someone could replace by a FIFO (:func:`open_regular`,
:func:`read_regular_text`; see ``_read``) and the signals that interrupt a dsh command
(:data:`INTERRUPTS`).

It imports ``os``, ``stat``, ``errno`` and ``collections.abc``, and takes and returns paths as
strings: a served ``dsh exec`` reads its home, trust rule, deployment and signals here before
anything else, and pays for neither ``typing`` nor ``pathlib``. :mod:`dsh.paths` is the typed API on
top (``Path`` results, a ``DeploymentChoice`` record) and re-exports everything here; use it unless
you are writing start-up code that must stay this small.
"""

from __future__ import annotations

from ._errors import NotRegularFileError, UntrustedPathError
from ._home import DEFAULT_HOME, DEPLOYMENT_ENV, HOME_ENV, deployment_in_effect, home_text, relative_home
from ._read import open_regular, read_regular_text
from ._trust import (
    check_trusted,
    create_private_file,
    ensure_private_dir,
    open_trusted,
    read_trusted_text,
    trust_fault,
    trusted_paths,
)

__all__ = [
    "DEFAULT_HOME",
    "DEPLOYMENT_ENV",
    "HOME_ENV",
    "INTERRUPTS",
    "NotRegularFileError",
    "UntrustedPathError",
    "check_trusted",
    "create_private_file",
    "deployment_in_effect",
    "ensure_private_dir",
    "home_text",
    "open_regular",
    "open_trusted",
    "read_regular_text",
    "read_trusted_text",
    "relative_home",
    "trust_fault",
    "trusted_paths",
]

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
served client reads it too. Every signal whose default action ends a process and that someone else
sends, as names (this platform has some of them); not SIGKILL (uncatchable), the faults a process
raises on itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGTRAP: nothing can go on after
them), real-time signals, nor SIGPIPE and SIGXFSZ, which Python ignores. Handlers are set through
:mod:`dsh.paths.signals`."""
