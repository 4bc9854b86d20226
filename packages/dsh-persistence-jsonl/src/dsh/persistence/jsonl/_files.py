"""File primitives of the JSONL backend: never through a symlink, errors naming the path (and the session)."""

from __future__ import annotations

import errno
import os
import stat

from dsh.paths import NotRegularFileError, open_regular
from dsh.session import PersistenceError

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 17


def open_nofollow(path: str, flags: int, mode: int = 0o600, *, session_id: str | None = None) -> int:
    """Open the last component without following a symlink; ``FileNotFoundError`` passes through."""
    try:
        return os.open(path, flags | NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PersistenceError(
                f"{path} is a symbolic link; dsh never writes through one (remove it)", session_id=session_id
            ) from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise PersistenceError(f"cannot open {path}: {exc.strerror}", session_id=session_id) from None


def open_read(path: str, *, session_id: str | None = None) -> int:
    """Open a transcript for reading: never through a symlink, never blocking on a FIFO or device."""
    try:
        return open_regular(path, follow=False)
    except NotRegularFileError:
        raise PersistenceError(f"{path} is not a regular file; move it aside", session_id=session_id) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PersistenceError(f"{path} is a symbolic link; move it aside", session_id=session_id) from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise PersistenceError(f"cannot open {path}: {exc.strerror}", session_id=session_id) from None


def check_regular(fd: int, path: str, session_id: str | None = None) -> os.stat_result:
    """``fstat`` of ``fd``; refuse anything but a regular file (a FIFO, a device, a directory)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise PersistenceError(f"{path} is not a regular file; move it aside", session_id=session_id)
    return info


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append(fd: int, data: bytes, path: str, *, fsync: bool, session_id: str) -> None:
    """Write ``data`` at the end of ``fd`` in bounded chunks, then fsync when asked."""
    # Bounded writes keep each system call short; a writer killed between two leaves a prefix
    # of its flush without a marker, which the next load ignores and the next writer cuts.
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view[:_WRITE_CHUNK]) :]
        if fsync:
            os.fsync(fd)
    except OSError as exc:
        raise PersistenceError(f"cannot append to {path}: {exc.strerror}", session_id=session_id) from None


def rfind(fd: int, needle: bytes, start: int, end: int) -> int:
    """Offset of the last ``needle`` within ``[start, end)`` of ``fd``; -1 if none.

    Reads backwards in chunks that start small (the last marker is usually in the last few bytes)
    and double up to 1 MiB, so a torn tail of any size is crossed without reading the file whole.
    """
    chunk = 4096
    while end - start >= len(needle):
        lo = max(start, end - chunk)
        index = os.pread(fd, end - lo, lo).rfind(needle)
        if index >= 0:
            return lo + index
        if lo == start:
            break
        end = lo + len(needle) - 1  # a needle may straddle the chunk boundary
        chunk = min(chunk * 2, _CHUNK)
    return -1
