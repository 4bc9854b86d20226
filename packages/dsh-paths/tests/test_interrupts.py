"""What an interruption carries, read without an executor (``dsh.paths.interrupts``)."""

from __future__ import annotations

import signal
import time
from typing import Any, NamedTuple

import pytest

from dsh.paths.interrupts import Interrupted, Interrupts, interruption, printed_before


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
