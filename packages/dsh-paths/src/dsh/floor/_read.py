"""Opening a file dsh reads that someone could replace: never block on a FIFO or a device.

A plain ``open()`` of a FIFO waits for a writer that may never come, and a device can block or
never end; either would hang every dsh command. So the open is non-blocking, the descriptor is
checked with ``fstat`` and anything but a regular file is refused in one sentence naming the path.
"""

from __future__ import annotations

import os
import stat

from ._errors import NotRegularFileError

__all__ = ["open_regular", "read_regular_text", "refuse_irregular"]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "something else")


def refuse_irregular(info: os.stat_result, path: str | os.PathLike[str], what: str = "") -> None:
    """Raise :class:`NotRegularFileError` unless ``info`` (an ``fstat`` of what was opened) is a regular file."""
    if not stat.S_ISREG(info.st_mode):
        label = f"{what} {os.fspath(path)}" if what else os.fspath(path)
        kind = _kind(info.st_mode)
        raise NotRegularFileError(
            path,
            f"refusing {label}: it is {kind}, not a regular file; move it aside",
            f"it is {kind}, not a regular file",
        )


def open_regular(path: str | os.PathLike[str], what: str = "", *, follow: bool = True) -> int:
    """Open ``path`` for reading without blocking; return a blocking descriptor of a regular file.

    Raises :class:`NotRegularFileError` (an ``OSError``) for a FIFO, device, socket or directory,
    ``FileNotFoundError`` and other ``OSError`` as ``os.open`` does. With ``follow=False`` a
    symbolic link as the last component is refused by the system (``ELOOP``).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        refuse_irregular(os.fstat(fd), path, what)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_text(path: str | os.PathLike[str], what: str = "") -> str:
    """The UTF-8 text of the regular file ``path`` (see :func:`open_regular`)."""
    with os.fdopen(open_regular(path, what), "r", encoding="utf-8") as handle:
        return handle.read()
