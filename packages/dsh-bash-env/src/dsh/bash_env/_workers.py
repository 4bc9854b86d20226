"""Reusable daemon threads for contributor resolves (the registry's one executor)."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable

Job = Callable[[], "Callable[[], None] | None"]
"""Work for a worker; what it returns runs once the worker is idle again.

A job reports its own failures (:meth:`Batch.run` makes any of its own the call's failure). One that
raises anyway does not end the worker, nor print a thread traceback on the user's terminal.
"""


class _Workers:
    """Reusable daemon threads for resolves: an idle one takes the job, else a new one starts.

    Not a fixed-size pool: a resolve stuck past its deadline keeps its thread, and a fixed pool
    would then starve every other contributor. Stuck resolves are bounded per contributor by
    :data:`MAX_OVERDUE`; idle threads exit after a minute. Daemon threads never keep the process
    alive. The hand-off is a ``queue.SimpleQueue`` per worker (measured as cheap as a pair of
    plain locks, and cheaper than an event).
    """

    IDLE_EXIT = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Job]] = []

    def submit(self, job: Job) -> None:
        """Run ``job`` on an idle worker or a new one."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._work, args=(inbox,), name="dsh-resolve", daemon=True).start()
        inbox.put(job)

    def _work(self, inbox: queue.SimpleQueue[Job]) -> None:
        while True:
            try:
                job = inbox.get(timeout=self.IDLE_EXIT)
            except queue.Empty:
                with self._lock:
                    if any(q is inbox for q in self._idle):
                        self._idle.remove(inbox)
                        return
                continue  # handed a job just as the wait ended: take it
            try:
                then = job()
            except BaseException:  # the job reported what it could (see Job)
                then = None
            # Idle again before the caller wakes, so its next call finds this worker free.
            with self._lock:
                self._idle.append(inbox)
            if then is not None:
                # A wake-up only releases a lock and asks a loop to look again; were it to fail, its
                # caller still looks again when its wait times out, and finds the outcome there.
                with contextlib.suppress(BaseException):
                    then()


WORKERS = _Workers()
