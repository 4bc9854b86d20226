"""How the agent's coroutines run: without an event loop when nothing suspends, else under asyncio.

Both drivers are interrupted the same way from the caller's side: :func:`interruptible` installs
one :class:`dsh.bash.Interrupts` for the whole command. Before any command started (imports, boot,
opening the session) a signal stops dsh at once, either driver: ``128+N`` and one line saying
nothing ran. Once a command started, without an event loop a signal arrives as
:class:`dsh.bash.Interrupted` where the command is waited for; under asyncio it cancels the running
task. Either way the command's group is killed, the turn is flushed as interrupted (a signal during
a flush lets it finish), and dsh exits ``128+N``. A signal that comes after the command ended does
not undo it: its turn is recorded as it ran and dsh exits with the command's status, saying so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from dsh.bash import Interrupts, interruption
from dsh.cli_fast._status import interrupted_early, interrupted_late, interrupted_reason
from dsh.core import DshError
from dsh.paths.signals import interrupt_signals

T = TypeVar("T")

INTERRUPTS = interrupt_signals()
"""Signals that interrupt ``dsh exec`` and ``dsh run``: the command's group is killed, the turn flushed."""


def run_sync(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end in this thread, without an event loop.

    Only for a coroutine that never suspends (see :func:`dsh.agent.needs_event_loop`);
    one that does is closed (its ``finally`` blocks run) and reported as dsh's own failure.
    """
    try:
        main.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    main.close()
    raise DshError("internal error: a run without an event loop waited on one; run it with --debug and report it")


def run_async(main: Coroutine[Any, Any, T], interrupts: Interrupts) -> T:
    """Run ``main`` under asyncio (imported here, only when needed); a signal cancels it."""
    import asyncio

    async def runner() -> T:
        loop = asyncio.get_running_loop()
        work = asyncio.ensure_future(main)

        def cancel(reason: str) -> None:
            loop.call_soon_threadsafe(work.cancel, reason)

        with interrupts.cancelling(cancel):
            await asyncio.wait({work})
        return work.result()

    return asyncio.run(runner())


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
            if interruption(exc) is None:
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
