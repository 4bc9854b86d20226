"""What an interruption carries, read without an executor (``dsh.paths.interrupts``)."""

from __future__ import annotations

from typing import Any, NamedTuple

from dsh.paths.interrupts import Interrupted, interruption, printed_before


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
