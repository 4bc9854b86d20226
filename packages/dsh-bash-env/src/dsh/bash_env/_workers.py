"""Reusable daemon threads for contributor resolves (the registry's one executor)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class _Workers:
    """Reusable daemon threads for resolves: an idle one takes the job, else a new one starts.

    Not a fixed-size pool: a resolve stuck past its deadline keeps its thread, and a fixed pool
    would then starve every other contributor. Stuck resolves are bounded per contributor by
    :data:`MAX_OVERDUE`; idle threads exit after a minute. Daemon threads never keep the process
    alive.
    """

    IDLE_EXIT = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` (which must not raise) on an idle worker or a new one."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._work, args=(inbox,), name="dsh-resolve", daemon=True).start()
        inbox.put(job)

    def _work(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            try:
                job = inbox.get(timeout=self.IDLE_EXIT)
            except queue.Empty:
                with self._lock:
                    if any(q is inbox for q in self._idle):
                        self._idle.remove(inbox)
                        return
                continue  # handed a job just as the wait ended: take it
            job()
            with self._lock:
                self._idle.append(inbox)


WORKERS = _Workers()
