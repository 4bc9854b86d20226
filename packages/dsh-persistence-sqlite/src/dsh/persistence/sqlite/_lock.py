"""The per-session turn lock of the SQLite backend: an ``flock`` on a file beside the database.

The holder removes the file when it releases (while it still holds the lock), so the folder keeps
only the locks held now. That is safe because a taker checks, once it holds the lock, that the name
still leads to the file it locked: one it opened just before a holder removed it, or that another
process then created anew, is given up and the name opened again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable

from dsh.session import PersistenceError, SessionLockedError

_ROUNDS = 64
"""Times the name may change under a taker before it gives up: each change is another process taking
and releasing the lock in between, so this is a fault, not contention."""


def lock_file(lock_dir: str, session_id: str) -> Callable[[], None]:
    """Hold an ``flock`` on ``<lock_dir>/<session id>.lock`` (never through a symlink); return its release."""
    name = f"{session_id}.lock"
    lock_path = os.path.join(lock_dir, name)
    for _ in range(_ROUNDS):
        dir_fd, fd = _open(lock_dir, name, lock_path, session_id)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode("utf-8", "replace").strip() or "another process"
            _close(fd, dir_fd)
            raise SessionLockedError(
                f"session {session_id} is being written by {holder} (lock {lock_path}); {SessionLockedError.REMEDY}",
                session_id=session_id,
            ) from None
        except OSError as exc:
            _close(fd, dir_fd)
            raise PersistenceError(
                f"session lock {lock_path}: cannot lock it: {exc.strerror or exc}", session_id=session_id
            ) from None
        if _still_named(dir_fd, name, fd):
            break
        _close(fd, dir_fd)  # a releaser removed the file we locked: take the name's current file
    else:
        raise PersistenceError(
            f"session lock {lock_path}: its file was replaced {_ROUNDS} times while it was being taken",
            session_id=session_id,
        )
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
            # Still holding it: whoever opened this file meanwhile finds it unnamed and starts again.
            # Should the folder refuse (read-only), the file stays for the next holder: the lock is the flock.
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dir_fd)
            _close(fd, dir_fd)  # closing the only descriptor drops the flock

    return release


def _open(lock_dir: str, name: str, lock_path: str, session_id: str) -> tuple[int, int]:
    """The lock folder and the lock file, opened without following a symlink."""
    try:
        os.makedirs(lock_dir, mode=0o700, exist_ok=True)
        dir_fd = os.open(lock_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        except BaseException:
            os.close(dir_fd)
            raise
    except OSError as exc:
        raise PersistenceError(
            f"session lock {lock_path}: cannot open it: {exc.strerror or exc} (the lock folder must be a "
            "real directory, not a symlink)",
            session_id=session_id,
        ) from None
    return dir_fd, fd


def _still_named(dir_fd: int, name: str, fd: int) -> bool:
    """Whether ``name`` in the folder is the file ``fd`` holds (not removed, not made anew since)."""
    try:
        named = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _close(fd: int, dir_fd: int) -> None:
    os.close(fd)
    os.close(dir_fd)
