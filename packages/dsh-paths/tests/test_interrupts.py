"""What an interruption carries, read without an executor (``dsh.paths.interrupts``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Generator
from typing import Any, NamedTuple

import pytest

from dsh.paths.interrupts import (
    Interrupted,
    Interrupts,
    driven_blocking,
    interruption,
    printed_before,
    run_blocking,
)


class _Result(NamedTuple):
    stdout: str
    stderr: str

    def as_data(self) -> dict[str, Any]:
        return {"stdout": self.stdout, "stderr": self.stderr}


def test_an_interruption_carries_what_the_command_printed() -> None:
    printed = _Result("half\n", "")
    exc = Interrupted("SIGTERM", printed)
    assert interruption(exc) == "SIGTERM" and printed_before(exc) is printed


def test_nothing_was_printed_when_no_command_started_or_it_is_no_interruption() -> None:
    assert printed_before(Interrupted("SIGINT")) is None
    stray = ValueError("x")
    stray.result = _Result("a", "b")  # type: ignore[attr-defined]
    assert interruption(stray) is None and printed_before(stray) is None


def test_the_blocking_driver_says_so_to_what_it_runs_and_only_there() -> None:
    async def turn() -> bool:
        return driven_blocking()

    assert run_blocking(turn()) is True
    assert driven_blocking() is False


class _Suspends:
    def __await__(self) -> Generator[None, None, None]:
        yield


def test_a_coroutine_that_waits_on_a_loop_is_closed_and_named_a_bug() -> None:
    closed = []

    async def turn() -> None:
        try:
            await _Suspends()
        finally:
            closed.append(driven_blocking())

    with pytest.raises(RuntimeError, match=r"waited on one: drive it under asyncio instead"):
        run_blocking(turn())
    assert closed == [True] and driven_blocking() is False


def test_an_asyncio_cancellation_is_an_interruption_under_a_loop() -> None:
    import asyncio

    assert interruption(asyncio.CancelledError("SIGTERM")) == "SIGTERM"
    assert interruption(asyncio.CancelledError()) == "cancelled"


BLOCKING_FAILURE = """
import sys
from dsh.paths.interrupts import interruption, printed_before, run_blocking

async def turn():
    try:
        raise ValueError("a failure, no interruption")
    except ValueError as exc:
        return interruption(exc), printed_before(exc)

print(run_blocking(turn()), "asyncio" in sys.modules)
"""


def test_a_blocking_run_reads_a_failure_without_importing_asyncio() -> None:
    done = subprocess.run([sys.executable, "-c", BLOCKING_FAILURE], capture_output=True, text=True, check=True)
    assert done.stdout == "(None, None) False\n"


# Python runs a signal handler between two bytecodes of whatever runs then; in importlib's weak-reference
# callback (or a __del__) an exception is printed as "Exception ignored in ..." and lost. Code compiled
# under that callback's file and name stands in for it: the signal lands there, and must be raised after.
_CALLBACK = compile(
    "def cb(spin):\n"
    "    import os, signal\n"
    "    os.kill(os.getpid(), signal.SIGINT)\n"
    "    total = 0\n"
    "    for n in range(spin):\n"
    "        total += n\n"
    "    return total\n",
    "<frozen importlib._bootstrap>",
    "exec",
)


def test_a_signal_landing_where_python_would_swallow_the_exception_is_raised_after_it(
    capfd: pytest.CaptureFixture[str],
) -> None:
    namespace: dict[str, Any] = {}
    exec(_CALLBACK, namespace)
    where = ["the callback"]

    def run() -> None:
        namespace["cb"](200_000)  # the handler runs in here: it must not raise here
        where[0] = "after it"
        time.sleep(5)  # re-delivered a moment later: raised here
        where[0] = "nowhere"

    with Interrupts([signal.SIGINT]), pytest.raises(Interrupted, match="SIGINT"):
        run()
    assert where == ["after it"]
    assert "Traceback" not in capfd.readouterr().err
