"""How a run is driven, with or without an event loop, and how a signal interrupts it.

A coroutine is driven either under asyncio or by :func:`run_blocking`, without an event loop, to
its end in one step (one that never waits: dsh-agent's ``needs_event_loop`` says when a turn can be
so driven). :func:`driven_blocking` hands that fact down to the code the coroutine runs: where it
would await a child (an executor) it blocks instead, and nothing but a signal can interrupt it.

Under asyncio a signal cancels the waiting task (``asyncio.CancelledError``). Without an event loop
:class:`Interrupts` turns the first of its signals into :class:`Interrupted`, raised in the main
thread at once while dsh starts up (imports, boot, opening the session: nothing has run, so nothing
is lost). Inside :meth:`Interrupts.protected` (a spawn, a flush) and once a command has started
(:meth:`Interrupts.command_started`) a signal is only kept: it is raised by the next
:meth:`Interrupts.waiting` (where a command or a resolve is waited for), so it never lands in the
middle of a spawn or a flush, and one that comes after the command ended does not undo its record.
:func:`interruption` recognises both; a run driven without an event loop imports no asyncio to ask.

It lives beside :mod:`dsh.paths.signals`, below every distribution, so that a layer which runs
commands without being an executor (the agent loop) tells and records an interruption without
depending on one: the executors (dsh-bash) raise and arm it, the loop and the command read it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from contextvars import ContextVar
from importlib.machinery import ExtensionFileLoader
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from . import signals

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterable, Iterator
    from types import FrameType

    from .signals import Handler

T = TypeVar("T")

_BLOCKING: ContextVar[bool] = ContextVar("dsh_driven_blocking", default=False)


def driven_blocking() -> bool:
    """Whether the running coroutine is driven by :func:`run_blocking`, without an event loop.

    Then it must not wait on one: an executor's blocking ``run_sync`` stands in for its awaited
    ``run``, and a signal arrives as :class:`Interrupted`. False otherwise: under asyncio (``dsh
    serve``, ``dsh run``, an embedder's loop), or outside any driven coroutine.
    """
    return _BLOCKING.get()


def run_blocking(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end in this thread, without an event loop; :func:`driven_blocking` is True inside.

    Only for a coroutine that never suspends; one that does is closed (its ``finally`` blocks run)
    and :class:`RuntimeError` is raised, naming the bug: it waited on an event loop.
    """
    token = _BLOCKING.set(True)
    try:
        try:
            main.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        main.close()
    finally:
        _BLOCKING.reset(token)
    raise RuntimeError(
        "a coroutine driven without an event loop (dsh.paths.interrupts.run_blocking) waited on one: "
        "drive it under asyncio instead"
    )


@runtime_checkable
class Printed(Protocol):
    """What a command printed until its group was killed, as an executor's result carries it
    (``dsh.bash.ExecResult`` is one)."""

    @property
    def stdout(self) -> str:
        """What it wrote on stdout."""
        ...

    @property
    def stderr(self) -> str:
        """What it wrote on stderr."""
        ...

    def as_data(self) -> dict[str, Any]:
        """The result as plain data, for a transcript's record."""
        ...


class Interrupted(BaseException):
    """The run was interrupted (``reason``: a signal's name); like ``asyncio.CancelledError``, not an Exception.

    ``result``: when a command had started, what it printed until its group was killed (see
    :func:`printed_before`).
    """

    def __init__(self, reason: str, result: Printed | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.result = result


def printed_before(exc: BaseException) -> Printed | None:
    """What the command an interruption ``exc`` stopped had printed (the executor's result, with
    ``128+N`` as its status).

    The executors keep it on :class:`Interrupted` (without an event loop) and on
    ``dsh.bash.aio.CommandCancelled``, the ``asyncio.CancelledError`` they raise when a cancellation
    stopped a command. None when no command had started (or ``exc`` is no interruption).
    """
    result = getattr(exc, "result", None) if interruption(exc) is not None else None
    return result if isinstance(result, Printed) else None


def interrupted_status(reason: str) -> int:
    """The status of a command whose group was killed because of ``reason``: ``128+N`` for signal N,
    else ``128+SIGKILL`` (the group was killed for a cancellation that was no signal)."""
    number = signal.Signals.__members__.get(reason, signal.SIGKILL)
    return 128 + int(number)


def interruption(exc: BaseException) -> str | None:
    """Why ``exc`` interrupts a run (a signal's name, or ``"cancelled"``); None when it is no interruption."""
    if isinstance(exc, Interrupted):
        return exc.reason
    if driven_blocking():  # no event loop drives this run: nothing but a signal, as Interrupted, stops it
        return None
    # Else an event loop may have cancelled it: under one asyncio is loaded, so this import is free.
    from asyncio import CancelledError

    if isinstance(exc, CancelledError):
        return str(exc.args[0]) if exc.args and exc.args[0] else "cancelled"
    return None


REDELIVER_AFTER = 0.05
"""Seconds after which a signal that landed in a C extension's initialisation is delivered again."""


def _initialising_extension(frame: FrameType | None) -> bool:
    """Whether ``frame``'s stack is inside the import of a C extension (its init function runs)."""
    while frame is not None:
        if frame.f_code.co_name in ("create_module", "exec_module") and isinstance(
            frame.f_locals.get("self"), ExtensionFileLoader
        ):
            return True
        frame = frame.f_back
    return False


_SWALLOWED = (("<frozen importlib._bootstrap>", "cb"),)
"""Frames whose exceptions Python prints as "Exception ignored in ..." and drops: the weak-reference
callback that releases an import's module lock (its file and function name)."""


def _raise_lost(frame: FrameType | None) -> bool:
    """Whether an exception raised in ``frame`` would be swallowed by the interpreter (a traceback on
    stderr, and the run goes on as if nothing was raised): a weak-reference callback, a ``__del__``."""
    if frame is None:
        return False
    code = frame.f_code
    return code.co_name == "__del__" or (code.co_filename, code.co_name) in _SWALLOWED


def _redeliver(sig: signal.Signals) -> None:
    """Send ``sig`` to this process again after :data:`REDELIVER_AFTER` seconds (from a thread)."""
    import os
    import time

    def later() -> None:
        time.sleep(REDELIVER_AFTER)
        os.kill(os.getpid(), sig)

    threading.Thread(target=later, daemon=True).start()


class Interrupts:
    """While active (a ``with`` block on the main thread), ``signals`` interrupt the run.

    The first signal is kept in :attr:`caught`; later ones are ignored (the first one's cleanup is
    under way). Inside :meth:`cancelling` (an event loop runs) it calls the given ``cancel`` instead.
    """

    _active: Interrupts | None = None

    def __init__(self, signals: Iterable[signal.Signals]) -> None:
        self.signals = tuple(signals)
        self.caught: signal.Signals | None = None
        """The first signal received, if one was."""
        self._armed = False
        self._held = 0
        self._deferred = False
        self.started = False
        """Whether a command was started (after which a signal is raised only by a wait)."""
        self._cancel: Callable[[str], object] | None = None
        self._saved: dict[int, Handler] = {}
        self._outer: Interrupts | None = None

    def __enter__(self) -> Interrupts:
        # A signal the caller ignores stays ignored (`nohup dsh exec ...`): `take` leaves it be.
        self._saved = signals.take(self.signals, self._handle)
        self._outer, Interrupts._active = Interrupts._active, self
        return self

    def __exit__(self, *exc: object) -> None:
        Interrupts._active = self._outer
        signals.restore(self._saved)

    def _reassert(self) -> None:
        """Put this one's handlers back where plugin code replaced them (at import or load), saying so.

        Done as a command starts, where the harm begins: a plugin that set SIGINT or SIGTERM back to
        ``SIG_DFL`` would let Ctrl-C kill dsh outright and leave the command running in its own
        session, out of the terminal's reach. (Before that, such a signal only ends dsh early.)
        """
        if threading.current_thread() is not threading.main_thread():
            return
        if signals.watched():  # plugin code runs: containment's wrappers stand around ours, and must
            return
        handle = self._handle
        for sig in self._saved:  # the signals this one took, not those its caller ignores
            if signals.current(sig) != handle:
                signals.install(sig, handle)
                import os

                name = signal.Signals(sig).name
                os.write(
                    2,
                    f"dsh: plugin code replaced dsh's {name} handler while dsh loaded; dsh put its own "
                    "back (plugins must not install signal handlers)\n".encode(),
                )

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.caught is not None:
            if self._deferred and signum == self.caught:  # our own re-delivery (or a second signal)
                self._deferred = False
                self._raise_now(frame)
            return
        self.caught = signal.Signals(signum)
        if self._cancel is not None:
            self._cancel(self.caught.name)
        else:
            self._raise_now(frame)

    def _raise_now(self, frame: FrameType | None) -> None:
        assert self.caught is not None
        if not (self._armed or (self._held == 0 and not self.started and self._cancel is None)):
            return
        if _initialising_extension(frame) or _raise_lost(frame):
            # An exception raised into a C extension's initialisation can crash the interpreter
            # (orjson's does, measured), and one raised in a weak-reference callback or a __del__ is
            # printed as a traceback and lost: ask again in a moment, once that code is through.
            self._deferred = True
            _redeliver(self.caught)
            return
        raise Interrupted(self.caught.name)

    def check(self) -> None:
        """Raise :class:`Interrupted` if a signal was caught."""
        if self.caught is not None:
            raise Interrupted(self.caught.name)

    @staticmethod
    def checkpoint() -> None:
        """Raise :class:`Interrupted` now if the active :class:`Interrupts` caught a signal (nothing started yet)."""
        active = Interrupts._active
        if active is not None:
            active.check()

    @staticmethod
    def before_command() -> bool:
        """Whether an active :class:`Interrupts` has seen no command start (False without one: unknown)."""
        active = Interrupts._active
        return active is not None and not active.started

    @staticmethod
    def command_started() -> None:
        """A command is being started: from now on a signal is kept until a wait (which kills it)."""
        active = Interrupts._active
        if active is not None:
            active._reassert()
            active.started = True

    @staticmethod
    @contextlib.contextmanager
    def protected() -> Iterator[None]:
        """A section a signal must not break (a spawn, a flush): one caught inside is kept.

        Before any command started it is raised when the section ends; after, by the next wait.
        """
        active = Interrupts._active
        if active is None or threading.current_thread() is not threading.main_thread():
            yield
            return
        active._held += 1
        try:
            yield
        finally:
            active._held -= 1
        if active._held == 0 and not active.started and active._cancel is None:
            active.check()

    @contextlib.contextmanager
    def cancelling(self, cancel: Callable[[str], object]) -> Iterator[None]:
        """While inside, a signal calls ``cancel(reason)`` (at once if one was caught already).

        Nested (a turn's task inside the run's), the inner ``cancel`` is called, and the outer one
        is back when the inner block ends.
        """
        outer, self._cancel = self._cancel, cancel
        try:
            if self.caught is not None:
                cancel(self.caught.name)
            yield
        finally:
            self._cancel = outer

    @staticmethod
    def active() -> Interrupts | None:
        """The :class:`Interrupts` now in force (the innermost ``with`` block), if any."""
        return Interrupts._active

    @staticmethod
    def rearm() -> None:
        """Forget the signal caught and the command started, so the next signal interrupts afresh.

        For an interactive run that goes on after one of its turns was interrupted.
        """
        active = Interrupts._active
        if active is not None:
            active.caught = None
            active.started = False
            active._deferred = False

    @staticmethod
    @contextlib.contextmanager
    def prompting() -> Iterator[None]:
        """A wait for the user's input: a signal raises :class:`Interrupted` in it at once, even while
        an event loop runs (whose loop is blocked by the read, so cancelling a task would wait for it)."""
        active = Interrupts._active
        if active is None or threading.current_thread() is not threading.main_thread():
            yield
            return
        active.check()
        cancel, active._cancel = active._cancel, None
        active._armed = True
        try:
            yield
        finally:
            active._armed = False
            active._cancel = cancel

    @staticmethod
    @contextlib.contextmanager
    def waiting() -> Iterator[None]:
        """A blocking wait the active :class:`Interrupts` may break with :class:`Interrupted`.

        A signal caught before raises on entry. Outside an active ``Interrupts``, or off the main
        thread (where signals are not delivered), the wait is not interruptible.
        """
        active = Interrupts._active
        if active is None or threading.current_thread() is not threading.main_thread():
            yield
            return
        active.check()
        active._armed = True
        try:
            yield
        finally:
            active._armed = False
