"""Waiting for a child without an event loop: the one-shot ``dsh exec`` imports no asyncio.

The same contract as :mod:`.aio`: output read as it comes into bounded :class:`~._capture.Capture`
objects (a timeout keeps it), the whole group killed on timeout or interruption, the command
reaped, and reading stopped a short grace after the shell itself exited. A signal turned into
:class:`~dsh.bash.Interrupted` by the active :class:`~dsh.bash.Interrupts` breaks the wait.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import subprocess
import time
from typing import TYPE_CHECKING

from dsh.paths.interrupts import Interrupts

from ._child import DRAIN_GRACE, EXIT_GRACE, POLL, Ended, close_passed, kill_group, pipe_capacity, reap, spawn

if TYPE_CHECKING:
    from typing import IO

    from ._capture import Capture
    from ._request import BashExecSpec

_CHUNK = 65536


def _read(
    proc: subprocess.Popen[bytes],
    stdin: bytes | None,
    out: Capture,
    err: Capture,
    deadline: float | None,
    after_exit: float,
) -> bool:
    """Feed ``stdin`` and read both pipes into ``out``/``err`` until they close: True, or False at ``deadline``.

    Once the shell itself has exited, read for ``after_exit`` seconds at most, then take what the
    pipes hold at that moment and stop (True): a process it left behind may hold the pipes for
    ever. A shell found exited is never a timeout, and its output is read whole, however late
    this process looked (it was stopped, or starved of the CPU, across the deadline): the
    deadline is for killing a command that still runs.
    """
    sel = selectors.DefaultSelector()
    try:
        readers = 0
        for stream, sink in ((proc.stdout, out), (proc.stderr, err)):
            if stream is not None:
                sel.register(stream.fileno(), selectors.EVENT_READ, sink)
                readers += 1
        pending = memoryview(stdin or b"")
        if proc.stdin is not None and not proc.stdin.closed:
            if pending:
                sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, None)
            else:
                _close(proc.stdin)
        exited_at: float | None = None
        while readers:
            now = time.monotonic()
            if exited_at is None and reap(proc):
                exited_at = now
            limit = deadline if exited_at is None else exited_at + after_exit
            if limit is not None and now >= limit:
                if exited_at is None:
                    return False
                _sweep(sel)
                return True
            for key, _ in sel.select(POLL if limit is None else min(POLL, limit - now)):
                if key.data is None:  # the shell's stdin can take PIPE_BUF bytes without blocking
                    try:
                        pending = pending[os.write(key.fd, pending[: select.PIPE_BUF]) :]
                    except (BrokenPipeError, ConnectionResetError):
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(key.fd)
                        if proc.stdin is not None:
                            _close(proc.stdin)
                elif chunk := os.read(key.fd, _CHUNK):
                    key.data.feed(chunk)
                else:
                    sel.unregister(key.fd)
                    readers -= 1
        return True
    finally:
        sel.close()


def _sweep(sel: selectors.BaseSelector) -> None:
    """Read what the pipes hold now, without waiting: at most a pipe's capacity each (a writer left
    behind may keep filling them)."""
    for key in list(sel.get_map().values()):
        if key.data is None:
            continue
        left = pipe_capacity(key.fd)
        while left > 0 and select.select([key.fd], [], [], 0)[0]:
            chunk = os.read(key.fd, min(_CHUNK, left))
            if not chunk:
                break
            key.data.feed(chunk)
            left -= len(chunk)


def _close(stream: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        stream.close()


def _finish(proc: subprocess.Popen[bytes]) -> None:
    """Close our ends of the pipes (a process left behind may still hold theirs) and reap the shell."""
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            _close(stream)
    _reap(proc, DRAIN_GRACE)


def _reap(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Reap the shell within ``timeout`` seconds (None: however long it takes); False if it still runs.

    ``Popen.wait`` with a timeout polls with growing sleeps, so a shell that exits a moment after
    closing its output costs a cold ``dsh exec`` up to several milliseconds; a pidfd wakes at the exit.
    """
    if reap(proc) or timeout is None:
        return reap(proc, block=True)
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+: poll with growing sleeps, as Popen.wait does
        end = time.monotonic() + timeout
        delay = 0.0005
        while not reap(proc):
            left = end - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(delay, left))
            delay = min(2 * delay, 0.05)
        return True
    try:
        return bool(select.select([pidfd], [], [], timeout)[0]) and reap(proc, pidfd, block=True)
    finally:
        os.close(pidfd)


def wait_blocking(spec: BashExecSpec, out: Capture, err: Capture) -> Ended:
    """Spawn ``spec`` in its own process group and wait for it, its timeout or an interruption.

    Output goes into ``out`` and ``err`` as it comes. An interruption (or any exception while
    waiting) kills the group, drains what it had printed, reaps it, then propagates.
    """
    try:
        Interrupts.checkpoint()  # a signal came before the command started: nothing starts
    except BaseException:
        close_passed(spec)
        raise
    proc = spawn(spec)
    deadline = None if spec.timeout is None else time.monotonic() + spec.timeout
    try:
        with Interrupts.waiting():
            finished = _read(proc, spec.stdin, out, err, deadline, EXIT_GRACE)
            if finished and not reap(proc):  # it closed its output but runs on (or is just ending)
                finished = _reap(proc, None if deadline is None else max(0.0, deadline - time.monotonic()))
    except BaseException:
        kill_group(proc.pid)
        with contextlib.suppress(Exception):
            _read(proc, None, out, err, None, DRAIN_GRACE)  # what it printed before the kill is kept
        with contextlib.suppress(Exception):
            _finish(proc)
        raise
    if not finished:
        kill_group(proc.pid)
        _read(proc, None, out, err, None, DRAIN_GRACE)
    _finish(proc)
    return Ended(proc.returncode, timed_out=not finished)
