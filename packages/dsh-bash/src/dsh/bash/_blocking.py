"""Waiting for a child without an event loop: the one-shot ``dsh exec`` imports no asyncio.

The same contract as :mod:`._aio`: output read as it comes (a timeout keeps it), the whole group
killed on timeout or interruption, the command reaped. A signal turned into
:class:`~dsh.bash.Interrupted` by the active :class:`~dsh.bash.Interrupts` breaks the wait.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

from ._child import DRAIN_GRACE, Ended, kill_group
from ._errors import ExecError
from ._interrupt import Interrupts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._request import BashExecSpec


def _spawn(spec: BashExecSpec) -> subprocess.Popen[bytes]:
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


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """After the group was killed: read what is left for a moment, then reap the command."""
    try:
        out, err = proc.communicate(timeout=DRAIN_GRACE)
    except subprocess.TimeoutExpired as exc:  # a process that escaped the group holds the pipes
        out = exc.stdout if isinstance(exc.stdout, bytes) else b""
        err = exc.stderr if isinstance(exc.stderr, bytes) else b""
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(DRAIN_GRACE)
    return out or b"", err or b""


def wait_blocking(spec: BashExecSpec) -> Ended:
    """Spawn ``spec`` in its own process group and wait for it, its timeout or an interruption.

    An interruption (or any exception while waiting) kills and reaps the group, then propagates.
    """
    Interrupts.checkpoint()  # a signal came before the command started: nothing starts
    proc = _spawn(spec)
    try:
        with Interrupts.waiting():
            out, err = proc.communicate(spec.stdin, timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = _drain(proc)
        return Ended(proc.returncode, out, err, timed_out=True)
    except BaseException:
        kill_group(proc.pid)
        with contextlib.suppress(Exception):
            _drain(proc)
        raise
    return Ended(proc.returncode, out, err, timed_out=False)
