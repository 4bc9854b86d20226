"""The JSONL backend's turn lock: an exclusive ``flock`` on ``<transcript>.lock``, one per session."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable

from dsh.session import PersistenceError, SessionLockedError

from ._files import check_regular, open_nofollow


class TurnLocks:
    """The session locks one backend holds, so two turns of one process exclude each other too."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}
        self._guard = threading.Lock()

    def holds(self, session_id: str) -> bool:
        with self._guard:
            return session_id in self._held

    def take(self, session_id: str, lock_path: str, check: Callable[[], None] | None = None) -> Callable[[], None]:
        """Lock ``lock_path`` (created 0600, never through a symlink) for ``session_id``, then run ``check``.

        Raises :class:`SessionLockedError` naming the session, the lock file and the holder's pid when
        another process, or another turn of this one, holds it. Returns an idempotent release.
        """
        with self._guard:
            if session_id in self._held:
                raise SessionLockedError(
                    f"session {session_id} is being written by another turn of this process (lock {lock_path})",
                    session_id=session_id,
                )
            fd = open_nofollow(lock_path, os.O_RDWR | os.O_CREAT, session_id=session_id)
            try:
                check_regular(fd, lock_path, session_id)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                    by = f"process {holder}" if holder.isdigit() else "another process"
                    raise SessionLockedError(
                        f"session {session_id} is being written by {by} (lock {lock_path}); "
                        + SessionLockedError.REMEDY,
                        session_id=session_id,
                    ) from None
                except OSError as exc:
                    raise PersistenceError(
                        f"cannot take the session lock {lock_path}: {exc.strerror or exc}", session_id=session_id
                    ) from None
                try:
                    # Fixed width, so a shorter pid overwrites a longer one without a truncate.
                    os.pwrite(fd, f"{os.getpid():>20}\n".encode(), 0)
                except OSError as exc:  # a full disk: the turn could not be saved anyway
                    raise PersistenceError(
                        f"cannot take the session lock {lock_path}: {exc.strerror or exc}", session_id=session_id
                    ) from None
                if check is not None:
                    check()
            except BaseException:
                os.close(fd)
                raise
            self._held[session_id] = fd

        def release() -> None:
            with self._guard:
                if self._held.get(session_id) == fd:
                    del self._held[session_id]
                    os.close(fd)

        return release

    def close(self) -> None:
        """Release every lock held."""
        with self._guard:
            for fd in self._held.values():
                os.close(fd)
            self._held.clear()


def locked(lock_path: str) -> bool:
    """Whether some process holds the lock at ``lock_path`` (taken and dropped at once when free).

    Creates nothing: no lock file means no holder. A lock this process holds counts as held.
    """
    try:
        fd = open_nofollow(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
