"""Output past ``max_output``: spilled whole to a private file under the home, with a retention rule."""

from __future__ import annotations

import contextlib
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

_SPILL_NAME = re.compile(r"[0-9a-f]{32}\.[a-z]+")
"""The names :func:`create_spill` makes; retention never touches any other file of the folder."""


def create_spill(directory: Path, stream: str) -> tuple[Path, int]:
    """A new private file under ``directory`` for ``stream``'s output: its path and a descriptor open for writing.

    The directory is created 0700 and checked like the home; the file is created exclusively,
    0600, under an unpredictable name, never through a symbolic link. The caller writes as output
    arrives and applies the retention rule (:func:`prune`) once it is closed.
    """
    try:
        ensure_private_dir(directory, "output directory")
        path = directory / f"{os.urandom(16).hex()}.{stream}"
        return path, create_private_file(path)
    except UntrustedPathError as exc:
        raise ExecError(str(exc), path=str(exc.path)) from None
    except OSError as exc:
        raise ExecError(
            f"cannot spill {stream} under {directory}: {exc.strerror or exc}", path=str(directory)
        ) from None


def prune(directory: Path, keep: Path) -> None:
    """Remove spills past :data:`SPILL_MAX_AGE`, then the oldest while the total passes :data:`SPILL_MAX_BYTES`."""
    now = time.time()
    files: list[tuple[float, int, str]] = []
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                ours = _SPILL_NAME.fullmatch(entry.name) is not None
                if ours and entry.is_file(follow_symlinks=False) and entry.path != str(keep):
                    files.append((info.st_mtime, info.st_size, entry.path))
    total = sum(size for _, size, _ in files) + keep.stat().st_size
    for mtime, size, path in sorted(files):
        if now - mtime > SPILL_MAX_AGE or total > SPILL_MAX_BYTES:
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size
