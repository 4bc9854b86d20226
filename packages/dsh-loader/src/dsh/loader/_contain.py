"""Containment of third-party code: whatever a plugin raises is that plugin's failure.

Plugin code runs at import, in ``apply``, in disposers and in resolvers. Any exception it raises,
``BaseException`` subclasses such as ``SystemExit``, ``KeyboardInterrupt`` and ``GeneratorExit``
included, must fail that plugin and never the command, ``dsh plugins`` or ``dsh serve``. The one
exception is a real signal (Ctrl-C, or SIGTERM, SIGHUP, SIGQUIT, ... under dsh's own interrupt
handling): while third-party code runs on the main thread, the handlers of :data:`~dsh.paths.INTERRUPTS`
(every signal whose default action ends a process and that another process sends) are wrapped to
note that a signal really arrived, and only then does what the handler raised propagate.

One watch serves many calls: the outermost :func:`contained` call (or a :func:`containment` block
around a whole composition or disposal) wraps the handlers once, and every call nested in it only
notes how many signals had arrived when it started. After each call the handlers are looked at again
(one ``signal.getsignal`` read per watched signal, about 2 µs each; CPython's private ``_signal`` would be cheaper
and is not used): one that the plugin replaced is wrapped in turn, so a real signal in a later call
is still noticed. When the outermost call or block ends, each handler still wrapped gets back
the one it wrapped; one that plugin code replaced stays as the plugin left it.

Plugin code that saves a handler and restores it later (the usual idiom) may save a watch's wrapper
and put it back after that watch ended. Such a stale wrapper is looked through: a watch wraps (and
the end of a watch gives back) the handler under it, so there is never more than one dsh layer,
however often a plugin is reloaded.

It lives in dsh-loader, the distribution that runs third-party code: the kernel knows nothing of
it and runs a plugin's ``apply`` and disposers through the guard its root was made with, which
:func:`dsh.loader.root` (and so every composed deployment) makes :func:`contained`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from dsh.core import EscapedError
from dsh.paths import signals

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

T = TypeVar("T")

__all__ = ["contained", "containment"]


_WATCHED = signals.interrupt_signals()
"""The signals whose handlers containment watches: those dsh's interrupt handling turns into an
interruption of the run (``dsh.paths.INTERRUPTS``, the one list)."""


_Handler = Callable[[int, FrameType | None], Any]


class _Wrapper:
    """A handler a watch installed: notes a real signal for its watch, then calls the handler it wraps.

    Plugin code that saves a handler (``signal.getsignal``, the return of ``signal.signal``) may get
    one of these and install it again after its watch ended. Watches look through such a stale
    wrapper to the handler it wraps, so handlers never pile up one dsh layer per reload.
    """

    __slots__ = ("watch", "wraps")

    def __init__(self, watch: _Watch, wraps: _Handler) -> None:
        self.watch = watch
        self.wraps = wraps

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        self.watch.fired += 1
        return self.wraps(signum, frame)


def _unwrapped(handler: Any) -> Any:
    """``handler``, or for a wrapper of a watch that ended, the first handler under it that is not one."""
    while isinstance(handler, _Wrapper) and not handler.watch.live:
        handler = handler.wraps
    return handler


class _Watch:
    """Counts the real signals of :data:`~dsh.paths.INTERRUPTS` that arrive while its handlers are installed."""

    __slots__ = ("fired", "installed", "live")

    def __init__(self) -> None:
        self.fired = 0
        self.live = True
        """False once :meth:`disarm` ran: its wrappers are then looked through (see :class:`_Wrapper`)."""
        self.installed: dict[int, _Wrapper] = {}
        """Per signal, the wrapper of this watch that is (or was last) installed."""

    def arm(self) -> None:
        """Wrap every callable handler that is not this watch's (again after plugin code replaced one)."""
        installed = self.installed
        for signum in _WATCHED:
            current = signals.current(signum)
            if current is installed.get(signum):
                continue
            if isinstance(current, _Wrapper):
                if current.watch is self:  # plugin code put back an earlier wrapper of this watch
                    installed[signum] = current
                    continue
                current = _unwrapped(current)  # plugin code put back a stale one: one dsh layer only
            # With SIG_IGN or SIG_DFL no exception can come from a real signal at all.
            if callable(current):
                # A new wrapper for each wrap (never a shared one): plugin code may chain to the one
                # it replaced, and a shared one would then chain back to the plugin's, endlessly.
                handler = installed[signum] = _Wrapper(self, current)
                signals.install(signum, handler)
            else:
                installed.pop(signum, None)

    def disarm(self) -> None:
        """End the watch: a wrapper (this watch's or a stale one) gives back what it wraps; a plugin's handler stays."""
        self.live = False
        for signum in _WATCHED:
            current = signals.current(signum)
            if isinstance(current, _Wrapper):
                handler = _unwrapped(current)
                if handler is not current:  # (a live wrapper is another watch's: left to that one)
                    signals.install(signum, handler)


_active: _Watch | None = None
"""The main thread's watch while a :func:`contained` call or :func:`containment` block runs."""


def _hold(watch: _Watch | None) -> None:
    """Make ``watch`` the main thread's (None: none), and tell the signal owner (``signals.watched()``)."""
    global _active
    _active = watch
    signals.set_watched(watch is not None)


def _armed() -> _Watch:
    """A new watch, wrapping the handlers now (a real signal meanwhile gives back what it wrapped, then propagates)."""
    watch = _Watch()
    try:
        watch.arm()
    except BaseException:
        watch.disarm()
        raise
    return watch


class _Containment:
    __slots__ = ("_own",)

    def __init__(self) -> None:
        self._own: _Watch | None = None

    def __enter__(self) -> None:
        if _active is None and threading.current_thread() is threading.main_thread():
            self._own = watch = _armed()
            _hold(watch)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        watch, self._own = self._own, None
        if watch is not None:
            if _active is watch:
                _hold(None)
            watch.disarm()


def containment() -> AbstractContextManager[None]:
    """Hold one signal watch across many :func:`contained` calls (a composition, a disposal).

    Each call inside then costs only its ``try`` and a look at the handlers; they are wrapped on
    entry and given back on exit. Nested blocks and calls reuse the outermost watch. Off the main
    thread it does nothing.
    """
    return _Containment()


def contained(call: Callable[[], T]) -> T:
    """Run third-party ``call``; re-raise a real Ctrl-C, turn any other ``BaseException`` into :class:`EscapedError`.

    Ordinary exceptions propagate unchanged. Outside the main thread no ``KeyboardInterrupt`` can
    come from the terminal (Python delivers signals to the main thread), so every one is contained.
    """
    if threading.current_thread() is not threading.main_thread():
        try:
            return call()
        except Exception:
            raise
        except BaseException as exc:
            raise EscapedError(exc) from exc
    watch = _active
    outermost = watch is None
    if watch is None:
        watch = _armed()
        _hold(watch)
    mark = watch.fired
    try:
        return call()
    except Exception:
        raise
    except BaseException as exc:
        if watch.fired != mark:  # a real signal's handler raised it (KeyboardInterrupt, dsh's Interrupted)
            raise
        raise EscapedError(exc) from exc
    finally:
        if outermost:
            if _active is watch:
                _hold(None)
            watch.disarm()
        else:
            watch.arm()
