"""A bounded pool of daemon threads behind the standard ``concurrent.futures.Executor`` interface."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Work = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonPool(Executor):
    """Up to ``size`` threads run what is submitted, in turn; each ``submit`` returns a standard ``Future``.

    ``ThreadPoolExecutor`` would do but for one thing: the interpreter joins its threads when it exits,
    so a contributor's ``resolve()`` that never returns would hold ``dsh exec`` after its call had
    already failed (and a ``dsh serve`` asked to stop). These threads are daemons: a stuck one never
    keeps the process alive. Threads start when work finds none idle, up to ``size``; past that, work
    waits in the pool's queue. What the submitted function raises is set on its future, never printed.
    """

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one release per thread back from a piece of work
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` on one of the pool's threads."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the {self._name} pool was shut down")
            self._queue.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._size:
                thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                thread.start()
                self._threads.append(thread)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; threads end once the queue is empty (``cancel_futures``: empty it now)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            if cancel_futures:
                while True:
                    try:
                        work = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if work is not None:
                        work[0].cancel()
            for _ in threads:
                self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()

    @property
    def threads(self) -> int:
        """How many threads the pool started (at most its size)."""
        return len(self._threads)

    def _work(self) -> None:
        while (work := self._queue.get()) is not None:
            self._run(*work)
            del work  # nothing of a finished piece of work stays alive while this thread waits

    def _run(self, future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not future.set_running_or_notify_cancel():
            self._idle.release()
            return
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # the submitter reads it from the future
            self._idle.release()
            future.set_exception(exc)
        else:
            # Idle before the submitter wakes: its next submit finds this thread instead of starting one.
            self._idle.release()
            future.set_result(result)
