"""Output past ``max_output``: spilled whole to a private file under the home, with a retention rule.

Retention never touches a live spill (a decision): a spill is live while its writer holds it open
(the writer holds an advisory ``flock`` on it for as long as it writes, in this process or another
dsh) or when it was written since the pruning command started (a concurrent command that finished
in the meantime; its result names the file). Live spills count towards the folder's budget but are
never removed; the oldest of the others go first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from pathlib import Path

from dsh.paths import UntrustedPathError, create_private_file, ensure_private_dir

from ._errors import ExecError

SPILL_MAX_AGE = 7 * 24 * 3600
"""Spilled output older than this (seconds) is removed when the next spill is written."""
SPILL_MAX_BYTES = 256 * 1024 * 1024
"""Past this total, the oldest spilled files are removed when the next spill is written."""
_CLOCK_SLACK = 0.05
"""Seconds before a command's start still counted as "since it started": file times come from a
coarse clock that lags ``time.time()`` by up to a few milliseconds."""

_SPILL_NAME = re.compile(r"[0-9a-f]{32}\.[a-z]+")
"""The names :func:`create_spill` makes; retention never touches any other file of the folder."""


def create_spill(directory: Path, stream: str) -> tuple[Path, int]:
    """A new private file under ``directory`` for ``stream``'s output: its path and a descriptor open for writing.

    The directory is created 0700 and checked like the home; the file is created exclusively,
    0600, under an unpredictable name, never through a symbolic link, and locked (``flock``) for
    as long as the descriptor is open, so that no :func:`prune` removes it while it is written.
    The caller writes as output arrives, closes it, then applies the retention rule (:func:`prune`).
    """
    try:
        ensure_private_dir(directory, "output directory")
        path = directory / f"{os.urandom(16).hex()}.{stream}"
        fd = create_private_file(path)
    except UntrustedPathError as exc:
        raise ExecError(str(exc), path=str(exc.path)) from None
    except OSError as exc:
        raise ExecError(
            f"cannot spill {stream} under {directory}: {exc.strerror or exc}", path=str(directory)
        ) from None
    with contextlib.suppress(OSError):  # a file system without locks: the start-time rule still protects it
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return path, fd


def prune(directory: Path, keep: Path, *, since: float | None = None, budget: int | None = None) -> None:
    """Remove spills past :data:`SPILL_MAX_AGE`, then the oldest while the total passes ``budget``.

    ``budget`` defaults to :data:`SPILL_MAX_BYTES`. ``keep`` (the spill just written) and every
    live spill (open by its writer, or written at or after ``since``, the pruning command's start
    on the ``time.time()`` clock) count towards the total and are never removed.
    """
    now = time.time()
    budget = SPILL_MAX_BYTES if budget is None else budget
    young = (now if since is None else since) - _CLOCK_SLACK
    total = 0
    candidates: list[tuple[float, int, str]] = []
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if _SPILL_NAME.fullmatch(entry.name) is None:
                continue
            with contextlib.suppress(OSError):
                if not entry.is_file(follow_symlinks=False):
                    continue
                info = entry.stat(follow_symlinks=False)
                total += info.st_size
                if entry.path != str(keep) and info.st_mtime < young:
                    candidates.append((info.st_mtime, info.st_size, entry.path))
    for mtime, size, path in sorted(candidates):
        if (now - mtime > SPILL_MAX_AGE or total > budget) and _remove_unless_open(path):
            total -= size


def _remove_unless_open(path: str) -> bool:
    """Remove the spill at ``path`` unless its writer still holds it; whether it was removed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # still being written
        except OSError:
            pass  # no locks here: its age alone decides
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
