"""How the agent's coroutines run: without an event loop when nothing suspends, else under asyncio.

Without an event loop :func:`dsh.bash.run_blocking` drives the turn (one ``send``; the tool and
``exec_command`` read :func:`dsh.bash.driven_blocking` and block where they would await);
:func:`run_async` runs it under asyncio. Both are interrupted the same way from the caller's side:
:func:`interruptible` installs one :class:`dsh.bash.Interrupts` for the whole command. Before any
command started (imports, boot, opening the session) a signal stops dsh at once, either driver:
``128+N`` and one line saying nothing ran. Once a command started, without an event loop a signal
arrives as :class:`dsh.bash.Interrupted` where the command is waited for; under asyncio it cancels
the running task, and :func:`run_async` raises the cancellation as :class:`dsh.bash.Interrupted`.
Either way the command's group is killed, the turn is flushed as interrupted (a signal during a
flush lets it finish), and dsh exits ``128+N``. A signal that comes after the command ended does
not undo it: its turn is recorded as it ran and dsh exits with the command's status, saying so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from dsh.bash import Interrupted, Interrupts, interruption
from dsh.cli_fast._status import interrupted_early, interrupted_late, interrupted_reason
from dsh.paths.interrupts import printed_before
from dsh.paths.signals import interrupt_signals

T = TypeVar("T")

INTERRUPTS = interrupt_signals()
"""Signals that interrupt ``dsh exec`` and ``dsh run``: the command's group is killed, the turn flushed."""


def run_async(main: Coroutine[Any, Any, T], interrupts: Interrupts) -> T:
    """Run ``main`` under asyncio (imported here, only when needed); a signal cancels it, and the
    cancellation is raised as :class:`dsh.bash.Interrupted` (what the command printed on it)."""
    import asyncio

    async def runner() -> T:
        loop = asyncio.get_running_loop()
        work = asyncio.ensure_future(main)

        def cancel(reason: str) -> None:
            loop.call_soon_threadsafe(work.cancel, reason)

        with interrupts.cancelling(cancel):
            await asyncio.wait({work})
        return work.result()

    try:
        return asyncio.run(runner())
    except asyncio.CancelledError as exc:
        raise Interrupted(interruption(exc) or "cancelled", printed_before(exc)) from exc


def interruptible(main: Callable[[Interrupts], int]) -> int:
    """Run ``main``; on one of :data:`INTERRUPTS` its run is interrupted and the status is 128+N.

    A signal that came after the command ended (``main`` returned) leaves its status, with a note.
    """
    interrupted = False
    with Interrupts(INTERRUPTS) as interrupts:
        try:
            code = main(interrupts)
        except BaseException as exc:
            if interrupts.caught is None:
                raise
            interrupted = True
            if not isinstance(exc, Interrupted):
                print(f"dsh: {exc}", file=sys.stderr)
    caught = interrupts.caught
    if caught is None:
        return code
    if not interrupted:
        print(f"dsh: {interrupted_late(caught.name)}", file=sys.stderr)
        return code
    reason = interrupted_reason if interrupts.started else interrupted_early
    print(f"dsh: {reason(caught.name)}", file=sys.stderr)
    return 128 + caught.value
