"""Containment of third-party code: whatever a plugin raises is that plugin's failure.

Plugin code runs at import, in ``apply``, in disposers and in resolvers. Any exception it raises,
``BaseException`` subclasses such as ``SystemExit``, ``KeyboardInterrupt`` and ``GeneratorExit``
included, must fail that plugin and never the command, ``dsh plugins`` or ``dsh serve``. The one
exception is a real signal (Ctrl-C, or SIGTERM/SIGHUP under dsh's own interrupt handling): while
third-party code runs on the main thread, the handlers of SIGINT, SIGTERM and SIGHUP are wrapped to
note that a signal really arrived, and only then does what the handler raised propagate.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["EscapedError", "contained", "describe"]


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


class _SigintWatch:
    """Notes a real SIGINT, SIGTERM or SIGHUP while installed (main thread, Python-level handlers only)."""

    def __init__(self) -> None:
        self.fired = False
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: FrameType | None) -> Any:
        self.fired = True
        previous = self._previous.get(signum)
        if callable(previous):
            return previous(signum, frame)
        raise KeyboardInterrupt  # pragma: no cover - only installed over a callable handler

    def __enter__(self) -> _SigintWatch:
        if threading.current_thread() is threading.main_thread():
            for signum in _WATCHED:
                previous = signal.getsignal(signum)
                # With SIG_IGN or SIG_DFL no exception can come from a real signal at all.
                if callable(previous):
                    self._previous[signum] = previous
                    signal.signal(signum, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._handler:
                signal.signal(signum, previous)


def contained(call: Callable[[], T]) -> T:
    """Run third-party ``call``; re-raise a real Ctrl-C, turn any other ``BaseException`` into :class:`EscapedError`.

    Ordinary exceptions propagate unchanged. Outside the main thread no ``KeyboardInterrupt`` can
    come from the terminal (Python delivers signals to the main thread), so every one is contained.
    """
    with _SigintWatch() as watch:
        try:
            return call()
        except Exception:
            raise
        except BaseException as exc:
            if watch.fired:  # a real signal's handler raised it (KeyboardInterrupt, dsh's Interrupted)
                raise
            raise EscapedError(exc) from exc
