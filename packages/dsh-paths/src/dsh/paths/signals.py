"""The process's signal handlers: the one module of dsh that sets them.

Every dsh module outside the fenced start-up path asks it: :func:`take` installs a handler on
signals and returns what it replaced, :func:`restore` gives that back, :func:`install` and
:func:`current` set and read one handler, :func:`ignored` says whether the process ignores one,
and :func:`on_loop` hands signals to a callback on an asyncio loop (``dsh serve``, ``dsh mcp``).
(``dsh.cli_fast``, the served client, reads :data:`~dsh.paths.INTERRUPTS` and keeps its own calls
into the C module: a served ``dsh exec`` must not import ``signal``, which loads ``enum``.) It lives
in dsh-paths, the standard-library base every distribution imports, so dsh-bash's interrupt
handling, dsh-loader's containment and the ``dsh`` command share it.

It also holds one fact those owners share: whether a containment watch has its wrappers around the
handlers now (:func:`watched`), so that dsh-bash's ``Interrupts`` then leaves its handlers be.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeAlias

from . import INTERRUPTS

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "INTERRUPTS",
    "Handler",
    "current",
    "ignored",
    "install",
    "interrupt_signals",
    "on_loop",
    "restore",
    "set_watched",
    "take",
    "watched",
]

Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
"""What ``signal.getsignal`` returns and ``signal.signal`` takes."""

_watched = False


def interrupt_signals() -> tuple[signal.Signals, ...]:
    """The signals of :data:`INTERRUPTS` this platform has."""
    return tuple(signal.Signals[name] for name in INTERRUPTS if hasattr(signal, name))


def current(signum: int) -> Handler:
    """The handler of ``signum`` now (``signal.getsignal``)."""
    return signal.getsignal(signum)


def ignored(signum: int) -> bool:
    """Whether the process ignores ``signum`` (``SIG_IGN``: ``nohup``, a script's ``... &``); dsh leaves those be."""
    return signal.getsignal(signum) == signal.SIG_IGN


def install(signum: int, handler: Handler) -> Handler:
    """Set the handler of ``signum`` (main thread only); return the one it replaced."""
    return signal.signal(signum, handler)


def take(signums: Iterable[int], handler: Handler) -> dict[int, Handler]:
    """Install ``handler`` on each of ``signums`` the process does not ignore; what each replaced, for :func:`restore`.

    A signal the caller ignores (``nohup dsh exec ...``, a script's ``... &``) stays ignored: it is
    not dsh's to interrupt the run with.
    """
    return {signum: install(signum, handler) for signum in signums if not ignored(signum)}


def restore(saved: Mapping[int, Handler]) -> None:
    """Give back the handlers :func:`take` replaced."""
    for signum, previous in saved.items():
        install(signum, previous)


def on_loop(
    loop: asyncio.AbstractEventLoop, signums: Iterable[int], callback: Callable[[int], object]
) -> Callable[[], None]:
    """Call ``callback(signum)`` on ``loop`` when one of ``signums`` arrives; the returned function undoes it.

    The handlers are asyncio's (``loop.add_signal_handler``: the loop's wakeup fd, so the callback
    runs as loop code, never inside whatever the signal interrupted). A signal the process ignores
    stays ignored, as with :func:`take`: ``nohup dsh serve &`` outlives its terminal.
    """
    taken = [signum for signum in signums if not ignored(signum)]
    for signum in taken:
        loop.add_signal_handler(signum, callback, signum)

    def undo() -> None:
        for signum in taken:
            loop.remove_signal_handler(signum)

    return undo


def watched() -> bool:
    """Whether a containment watch's wrappers stand around the interrupt handlers now.

    Code that checks its own handlers are in force (dsh-bash's ``Interrupts``) must leave them be
    meanwhile: the watch's wrapper around them is how a real signal is told from plugin code's own
    ``KeyboardInterrupt``, and replacing it would turn dsh's interruption into a plugin's failure.
    """
    return _watched


def set_watched(on: bool) -> None:
    """Say that a containment watch starts (True) or ended (False); only the containment calls it."""
    global _watched
    _watched = on
