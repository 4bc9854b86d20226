"""dsh.paths.signals: the one owner of signal handlers, and the one list of interrupting signals."""

from __future__ import annotations

import signal

import dsh.paths
from dsh.paths import INTERRUPTS, signals


def test_take_leaves_an_ignored_signal_ignored_and_restore_gives_back_what_it_replaced() -> None:
    def handler(signum: int, frame: object) -> None:
        raise AssertionError("no signal is sent")

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGUSR1, signal.SIGUSR2)}
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        saved = signals.take((signal.SIGUSR1, signal.SIGUSR2), handler)
        assert list(saved) == [signal.SIGUSR1]  # nohup's SIG_IGN is not dsh's to take
        assert signals.current(signal.SIGUSR1) is handler and signals.ignored(signal.SIGUSR2)
        signals.restore(saved)
        assert signals.current(signal.SIGUSR1) == before[signal.SIGUSR1]
    finally:
        for signum, previous in before.items():
            signal.signal(signum, previous)


def test_the_list_is_names_this_platform_turns_into_its_signals() -> None:
    assert signals.INTERRUPTS is INTERRUPTS is dsh.paths.INTERRUPTS
    numbers = signals.interrupt_signals()
    assert numbers[:2] == (signal.SIGINT, signal.SIGTERM)
    assert [s.name for s in numbers] == [name for name in INTERRUPTS if hasattr(signal, name)]
    assert not signals.watched()  # no containment watch outside one


def test_on_loop_hands_a_real_signal_to_the_loop_and_leaves_an_ignored_one_ignored() -> None:
    import asyncio
    import os

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGUSR1, signal.SIGUSR2)}
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)

    async def main() -> list[int]:
        got: list[int] = []
        arrived = asyncio.Event()

        def note(signum: int) -> None:
            got.append(signum)
            arrived.set()

        undo = signals.on_loop(asyncio.get_running_loop(), (signal.SIGUSR1, signal.SIGUSR2), note)
        try:
            assert signals.ignored(signal.SIGUSR2)  # nohup's SIG_IGN is not dsh's to take
            os.kill(os.getpid(), signal.SIGUSR1)
            await asyncio.wait_for(arrived.wait(), 10)
        finally:
            undo()
        return got

    try:
        assert asyncio.run(main()) == [signal.SIGUSR1]
        assert signals.current(signal.SIGUSR1) == signal.SIG_DFL  # given back
    finally:
        for signum, previous in before.items():
            signal.signal(signum, previous)
