"""The per-session turn lock of the SQLite backend: an ``flock`` on a file beside the database."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable

from dsh.session import PersistenceError, SessionLockedError


def lock_file(lock_dir: str, session_id: str) -> Callable[[], None]:
    """Hold an ``flock`` on ``<lock_dir>/<session id>.lock`` (never through a symlink); return its release."""
    lock_path = os.path.join(lock_dir, f"{session_id}.lock")
    try:
        os.makedirs(lock_dir, mode=0o700, exist_ok=True)
        dir_fd = os.open(lock_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fd = os.open(
                f"{session_id}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
            )
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise PersistenceError(
            f"session lock {lock_path}: cannot open it: {exc.strerror or exc} (the lock folder must be a "
            "real directory, not a symlink)",
            session_id=session_id,
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 256, 0).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        raise SessionLockedError(
            f"session {session_id} is being written by {holder} (lock {lock_path}); {SessionLockedError.REMEDY}",
            session_id=session_id,
        ) from None
    except OSError as exc:
        os.close(fd)
        raise PersistenceError(
            f"session lock {lock_path}: cannot lock it: {exc.strerror or exc}", session_id=session_id
        ) from None
    # Who holds it, for the message another writer gets; best effort, the flock is the lock.
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename}\n".encode(), 0)
    except OSError:
        pass
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            os.close(fd)  # closing the only descriptor drops the flock

    return release
