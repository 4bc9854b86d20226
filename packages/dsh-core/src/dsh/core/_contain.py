"""Containment of third-party code: whatever a plugin raises is that plugin's failure.

Plugin code runs at import, in ``apply``, in disposers and in resolvers. Any exception it raises,
``BaseException`` subclasses such as ``SystemExit``, ``KeyboardInterrupt`` and ``GeneratorExit``
included, must fail that plugin and never the command, ``dsh plugins`` or ``dsh serve``. The one
exception is a real signal (Ctrl-C, or SIGTERM/SIGHUP under dsh's own interrupt handling): while
third-party code runs on the main thread, the handlers of SIGINT, SIGTERM and SIGHUP are wrapped to
note that a signal really arrived, and only then does what the handler raised propagate.

One watch serves many calls: the outermost :func:`contained` call (or a :func:`containment` block
around a whole composition or disposal) wraps the handlers once, and every call nested in it only
notes how many signals had arrived when it started. After each call the handlers are looked at again
(three ``signal.getsignal`` reads, about 2 µs each; CPython's private ``_signal`` would be cheaper
and is not used): one that the plugin replaced is wrapped in turn, so a real signal in a later call
is still noticed. When the outermost call or block ends, each handler still wrapped gets back
the one it wrapped; one that plugin code replaced stays as the plugin left it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from contextlib import AbstractContextManager

T = TypeVar("T")

__all__ = ["EscapedError", "contained", "containment", "describe"]


class EscapedError(Exception):
    """A ``BaseException`` that third-party code raised, caught and turned into an ordinary failure.

    Not a ``DshError`` (see ``dsh.core._errors``): it reports a bug in the code that raised, not
    input dsh refused.
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(describe(original))
        self.original = original
        """The exception the third-party code raised."""


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception (of the original one for an :class:`EscapedError`)."""
    if isinstance(exc, EscapedError):
        exc = exc.original
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_WATCHED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Watch:
    """Counts the real SIGINT, SIGTERM and SIGHUP that arrive while its handlers are installed (main thread)."""

    __slots__ = ("fired", "installed", "wrapped")

    def __init__(self) -> None:
        self.fired = 0
        self.installed: dict[int, Callable[[int, FrameType | None], Any]] = {}
        """Per signal, the handler of this watch that is (or was last) installed."""
        self.wrapped: dict[int, Callable[[int, FrameType | None], Any]] = {}
        """Per signal, the handler that one wraps (given back by :meth:`disarm`)."""

    def _wrap(self, previous: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
        # A new handler for each wrap: plugin code may chain to the one it replaced, and one
        # handler shared by every wrap would then chain back to that plugin's, endlessly.
        def handler(signum: int, frame: FrameType | None) -> Any:
            self.fired += 1
            return previous(signum, frame)

        return handler

    def arm(self) -> None:
        """Wrap every callable handler that is not this watch's (again after plugin code replaced one)."""
        installed = self.installed
        for signum in _WATCHED:
            current = signal.getsignal(signum)
            if current is installed.get(signum):
                continue
            # With SIG_IGN or SIG_DFL no exception can come from a real signal at all.
            if callable(current):
                handler = installed[signum] = self._wrap(current)
                self.wrapped[signum] = current
                signal.signal(signum, handler)
            else:
                installed.pop(signum, None)
                self.wrapped.pop(signum, None)

    def disarm(self) -> None:
        """Give each signal still wrapped its handler back; leave one that plugin code replaced."""
        for signum, handler in self.installed.items():
            if signal.getsignal(signum) is handler:
                signal.signal(signum, self.wrapped[signum])


_active: _Watch | None = None
"""The main thread's watch while a :func:`contained` call or :func:`containment` block runs."""


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
        global _active
        if _active is None and threading.current_thread() is threading.main_thread():
            self._own = _active = _armed()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        global _active
        watch, self._own = self._own, None
        if watch is not None:
            if _active is watch:
                _active = None
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
    global _active
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
        watch = _active = _armed()
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
                _active = None
            watch.disarm()
        else:
            watch.arm()
