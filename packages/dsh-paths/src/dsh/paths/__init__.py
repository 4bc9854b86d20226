"""Resolution of the dsh harness home (``DSH_HOME``), and the one trust rule for what lives in it.

The precedence is a contract: an explicitly configured value, else the ``DSH_HOME``
environment variable (a blank value counts as unset), else ``~/.dsh``. The result is
always absolute with ``~`` expanded. Resolution is pure: it creates nothing.

The rules themselves live in :mod:`dsh.floor`, the standard-library floor (paths as text) a served
``dsh exec`` reads before anything else; this package is the typed API on top of it and re-exports
it: :func:`resolve_dsh_home` and :func:`ensure_private_dir` return ``Path``s;
:func:`check_trusted`, :func:`open_trusted`, :func:`read_trusted_text` and
:func:`create_private_file` are the one trust rule every consumer of the home applies, and
:func:`trust_fault` that rule on owner and mode, judged on a status, for every other check;
:func:`open_regular` and :func:`read_regular_text` the one safe way to open a file someone could
replace by a FIFO. :data:`INTERRUPTS` and :mod:`dsh.paths.signals` own the process's signals (see
there). :func:`seal_process` keeps a long-lived server's commands out of it (``_seal``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dsh import floor
from dsh.floor import (
    DEFAULT_HOME,
    DEPLOYMENT_ENV,
    HOME_ENV,
    INTERRUPTS,
    NotRegularFileError,
    UntrustedPathError,
    check_trusted,
    create_private_file,
    home_text,
    open_regular,
    open_trusted,
    read_regular_text,
    read_trusted_text,
    trust_fault,
    trusted_paths,
)

from ._seal import seal_process

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


def resolve_dsh_home(
    configured: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """Return the absolute harness home for ``configured`` under ``env``.

    ``env`` defaults to :data:`os.environ`. ``~`` expands against the ``HOME`` of ``env``
    when it has one, so a caller resolving for another environment gets that user's home.
    """
    return Path(home_text(configured, env))


def ensure_private_dir(path: str | os.PathLike[str], what: str = "") -> Path:
    """Create ``path`` and any missing parents as 0700 directories (whatever the umask); check it.

    Existing directories are not changed; the walk that makes the missing ones checks every
    component as :func:`check_trusted` does, the last as the trusted folder itself.
    """
    return Path(floor.ensure_private_dir(path, what))
