"""What the two ways of waiting share: how a child ended, and killing its whole process group."""

from __future__ import annotations

import contextlib
import os
import signal

from ._errors import ExecError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

    from ._request import BashExecSpec

TIMEOUT_EXIT = 124
"""Exit status of a command its timeout killed (as GNU ``timeout``)."""
DRAIN_GRACE = 2.0
"""Seconds to keep reading a killed group's output; a process that escaped the group may hold the pipes."""
EXIT_GRACE = 0.5
"""Seconds to keep reading after the shell itself exited: a daemon it started may hold the pipes for ever."""
POLL = 0.1
"""While the pipes are open, how often to check whether the shell itself has exited."""


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group led by ``pid``; a group already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def shell_status(returncode: int) -> int:
    """A child's status as a shell reports it: its own, or ``128+N`` for signal N (``subprocess`` says ``-N``)."""
    return returncode if returncode >= 0 else 128 - returncode


class Ended:
    """How a child ended; its output is in the :class:`~._capture.Capture` objects it was read into."""

    __slots__ = ("returncode", "timed_out")

    def __init__(self, returncode: int | None, timed_out: bool) -> None:
        self.returncode = returncode
        """As ``subprocess`` reports it (negative for a signal); None when it could not be reaped."""
        self.timed_out = timed_out

    @property
    def exit_code(self) -> int:
        """The status as a shell reports it: 124 on timeout, ``128+N`` for signal N."""
        if self.timed_out:
            return TIMEOUT_EXIT
        if self.returncode is None:
            return 128 + signal.SIGKILL
        return shell_status(self.returncode)


def spawn(spec: BashExecSpec) -> subprocess.Popen[bytes]:
    """Start ``spec`` in its own process group (so the whole group can be killed), its output on new pipes."""
    import subprocess

    if spec.cwd is not None and not os.path.isdir(spec.cwd):
        raise ExecError(f"working directory {spec.cwd} does not exist", path=spec.cwd)
    try:
        return subprocess.Popen(
            spec.argv,
            stdin=subprocess.PIPE if spec.stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(spec.env),
            cwd=spec.cwd,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise ExecError(f"shell '{spec.argv[0]}' was not found on PATH", shell=spec.argv[0]) from None
