"""Waiting for children under asyncio: overlapping calls (``dsh run``, ``dsh serve``, hooks) and background tasks.

The asyncio half of the executor (:meth:`~dsh.bash.LocalExecutor.run` and ``start`` import it; the
blocking half, ``run_sync``, is ``_blocking``). Imported by what runs under an event loop, so that
a run driven without one (:func:`dsh.bash.run_blocking`) imports no asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import select
import signal
import subprocess
import threading
from typing import TYPE_CHECKING

from . import _supervisor
from ._child import (
    DRAIN_GRACE,
    EXIT_GRACE,
    Ended,
    close_passed,
    kill_group,
    pipe_capacity,
    reap,
    shell_status,
    spawn,
    starting,
    supervised,
)
from ._errors import ExecError

if TYPE_CHECKING:
    from ._capture import Capture
    from ._request import BashExecRequest, BashExecSpec, ExecResult

__all__ = ["BackgroundProcess", "CommandCancelled", "spawn_async", "start_background", "wait_async"]

_CHUNK = 65536


async def spawn_async(spec: BashExecSpec) -> asyncio.subprocess.Process:
    """Start ``spec`` in its own process group, its output on asyncio's pipes (a background task reads them)."""
    try:
        return await _exec_async(spec)
    finally:
        close_passed(spec)


async def _exec_async(spec: BashExecSpec) -> asyncio.subprocess.Process:
    with starting(spec):
        proc = await asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.PIPE if spec.stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(spec.env),
            cwd=spec.cwd,
            start_new_session=True,
            pass_fds=spec.pass_fds,
        )
    supervised(proc.pid, lambda: None)  # asyncio's child watcher reaps it
    return proc


class _Watch:
    """A foreground child watched by the loop itself: its pipes and its pidfd are readers (no task, no thread).

    asyncio's own subprocess machinery costs a thread per child (its child watcher, before Python
    3.12), two transports and a task per pipe: about a quarter of a short call. Output goes into the
    sinks as it comes. The watch has :attr:`ended` once both pipes have closed, or reading was
    stopped (:meth:`stop`, or :attr:`grace` seconds after the shell's exit), and the shell is reaped.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        proc: subprocess.Popen[bytes],
        stdin: bytes | None,
        out: Capture,
        err: Capture,
    ) -> None:
        self.loop = loop
        self.proc = proc
        self.ended = False
        self.failure: BaseException | None = None
        """What a sink raised; the group was killed and reading stopped."""
        self.grace = EXIT_GRACE
        """Seconds to keep reading once the shell has exited (raised after killing the group)."""
        self._readers: dict[int, Capture] = {}
        self._sinks = ((proc.stdout, out), (proc.stderr, err))
        self._pending = memoryview(stdin or b"")
        self._stdin_fd: int | None = None
        self._pidfd: int | None = None
        self._reaper: threading.Thread | None = None
        """The thread that waits for the shell where there is no pidfd: the only one that reaps it then."""
        self._grace_timer: asyncio.TimerHandle | None = None
        self._waiter: asyncio.Future[None] | None = None

    def start(self) -> None:
        """Register the pipes and the exit with the loop; on failure the caller kills the group and closes.

        Each fd is recorded only once the loop took it, so :meth:`close` never unregisters one it lacks.
        """
        try:
            for stream, sink in self._sinks:
                if stream is not None:
                    fd = stream.fileno()
                    os.set_blocking(fd, False)
                    self.loop.add_reader(fd, self._read, fd)
                    self._readers[fd] = sink
            if self.proc.stdin is not None:
                if self._pending:
                    fd = self.proc.stdin.fileno()
                    os.set_blocking(fd, False)
                    self.loop.add_writer(fd, self._write)
                    self._stdin_fd = fd
                else:
                    self._close_stdin()
            try:
                pidfd = os.pidfd_open(self.proc.pid)
            except (AttributeError, OSError):  # not Linux 5.3+: a thread blocks in waitpid (asyncio's own way)
                self._reaper = threading.Thread(target=self._wait_in_thread, daemon=True)
                self._reaper.start()
            else:
                try:
                    self.loop.add_reader(pidfd, self._exited)
                except BaseException:
                    os.close(pidfd)
                    raise
                self._pidfd = pidfd
        except NotImplementedError:
            raise ExecError(
                f"the running event loop ({type(self.loop).__module__}.{type(self.loop).__qualname__}) cannot "
                "watch file descriptors: dsh.bash's run() needs a selector event loop or uvloop "
                "(loop.add_reader); use run_sync()"
            ) from None

    async def wait(self, timeout: float | None) -> bool:
        """Wait until :attr:`ended`, at most ``timeout`` seconds (None: no limit); whether it has."""
        if not self.ended:
            self._waiter = waiter = self.loop.create_future()
            timer = None if timeout is None else self.loop.call_later(timeout, self._wake)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        return self.ended

    def stop(self, *, sweep: bool = True) -> None:
        """Stop reading; the watch ends once the shell is reaped.

        With ``sweep``, what the pipes hold at this moment is read first (at most a pipe's capacity
        each: a writer left behind may keep filling them); what comes later is lost.
        """
        try:
            for fd in list(self._readers):
                sink = self._readers.pop(fd)
                self.loop.remove_reader(fd)
                if sweep and self.failure is None:
                    _sweep(fd, sink)
        finally:
            self._settle()

    def check_exit(self) -> None:
        """Look now whether the shell has exited (the loop may not have run its pidfd's callback yet)."""
        if self._pidfd is not None:  # without one, only the reaping thread may wait for the shell
            self._exited()

    def release(self, *, block: bool = False) -> None:
        """Make sure the shell is reaped though nobody awaits it any more (it was killed, so it ends soon).

        With ``block``, wait for it here; else poll once and, if it still runs, a daemon thread waits
        for it, so no zombie outlives the call.
        """
        if self.proc.returncode is not None or self._reaper is not None:
            return  # reaped, or the thread that reaps it is under way
        if block:
            reap(self.proc, self._pidfd, block=True)
        elif not reap(self.proc, self._pidfd):
            self._reaper = threading.Thread(target=reap, args=(self.proc,), kwargs={"block": True}, daemon=True)
            self._reaper.start()

    def close(self) -> None:
        """Unregister everything and close our ends of the pipes (the shell need not have been reaped).

        Best effort per step: a step that fails does not keep the pipes open; the first failure is raised.
        """
        failure: BaseException | None = None
        for step in (self.stop, self._unwatch_input, self._unwatch_exit):
            try:
                step()
            except BaseException as exc:
                failure = failure or exc
        if self._grace_timer is not None:
            self._grace_timer.cancel()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if failure is not None:
            raise failure

    def _unwatch_input(self) -> None:
        if self._stdin_fd is not None:
            fd, self._stdin_fd = self._stdin_fd, None
            self.loop.remove_writer(fd)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _settle(self) -> None:
        if not self.ended and not self._readers and self.proc.returncode is not None:
            self.ended = True
            if self._grace_timer is not None:
                self._grace_timer.cancel()
            self._wake()

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            del self._readers[fd]
            self.loop.remove_reader(fd)
            self._settle()
            return
        try:
            self._readers[fd].feed(chunk)
        except BaseException as exc:  # never leave a reader that fails at every wake-up
            self.failure = exc
            kill_group(self.proc.pid)
            self.stop(sweep=False)

    def _write(self) -> None:
        assert self._stdin_fd is not None
        try:
            # A writable pipe takes PIPE_BUF bytes without blocking.
            self._pending = self._pending[os.write(self._stdin_fd, self._pending[: select.PIPE_BUF]) :]
        except BlockingIOError:
            return
        except OSError:  # the command closed its input
            self._pending = self._pending[:0]
        if not self._pending:
            self.loop.remove_writer(self._stdin_fd)
            self._stdin_fd = None
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def _wait_in_thread(self) -> None:
        reap(self.proc, block=True)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(self._exited)

    def _unwatch_exit(self) -> None:
        if self._pidfd is not None:
            pidfd, self._pidfd = self._pidfd, None
            try:
                self.loop.remove_reader(pidfd)
            finally:
                os.close(pidfd)

    def _exited(self) -> None:
        if not reap(self.proc, self._pidfd):
            return  # not collectable yet: the pidfd stays readable and the loop calls again
        self._unwatch_exit()
        if self._readers and self._grace_timer is None:
            self._grace_timer = self.loop.call_later(self.grace, self.stop)
        self._settle()


def _sweep(fd: int, sink: Capture) -> None:
    """Read what the pipe ``fd`` holds now, without waiting, at most its capacity."""
    left = pipe_capacity(fd)
    while left > 0:
        try:
            chunk = os.read(fd, min(_CHUNK, left))
        except OSError:  # BlockingIOError: empty for now
            return
        if not chunk:
            return
        sink.feed(chunk)
        left -= len(chunk)


async def _kill_and_drain(watch: _Watch) -> None:
    """After a timeout or a cancellation: kill the group, read what is left for a moment, then reap the shell."""
    watch.grace = DRAIN_GRACE
    kill_group(watch.proc.pid)
    if not await watch.wait(DRAIN_GRACE):
        watch.stop()
        await watch.wait(DRAIN_GRACE)


class CommandCancelled(asyncio.CancelledError):
    """The cancellation of a run whose command had started: its group was killed, and ``result`` holds
    what it printed until then (``128+N`` as its status). Still an ``asyncio.CancelledError``."""

    def __init__(self, reason: str, result: ExecResult) -> None:
        super().__init__(reason)
        self.result = result


async def wait_async(spec: BashExecSpec, out: Capture, err: Capture) -> Ended:
    """Spawn ``spec`` and wait for it or its timeout, its output into ``out``/``err``.

    A cancelled wait kills and reaps the group, then re-raises.
    """
    loop = asyncio.get_running_loop()
    proc = spawn(spec)
    watch = _Watch(loop, proc, spec.stdin, out, err)
    timed_out = False
    try:
        watch.start()
    except BaseException:
        kill_group(proc.pid)
        try:
            watch.close()
        finally:
            watch.release(block=True)
        raise
    try:
        try:
            finished = await watch.wait(spec.timeout)
        except asyncio.CancelledError:
            with contextlib.suppress(asyncio.CancelledError):  # cancelled again: release() reaps
                await _kill_and_drain(watch)
            raise
        if watch.failure is not None:
            if not finished:
                await _kill_and_drain(watch)
            raise watch.failure
        if not finished:
            # The deadline is for killing a command that still runs. One found exited (this process
            # was stopped or starved across the deadline, and the loop has not yet seen the exit) is
            # no timeout: its output is read whole, for the exit grace at most, and its status kept.
            watch.check_exit()
            if proc.returncode is not None:
                await watch.wait(None)
            else:
                timed_out = True
                await _kill_and_drain(watch)
    finally:
        try:
            watch.release()
        finally:
            watch.close()
    return Ended(proc.returncode, timed_out)


class BackgroundProcess:
    """A command running in the background; its output is read as it comes, into bounded captures.

    Each stream goes into a :class:`~._capture.Capture`, as a foreground command's does: memory
    keeps at most the last ``max_output`` characters, and once the output is certain to pass
    them the whole stream is spilled (up to ``max_spill`` bytes) to a file under the spill
    folder. :meth:`read` returns what came since the previous read, cut as a foreground result is.
    """

    _ids = itertools.count(1)

    def __init__(self, proc: asyncio.subprocess.Process, request: BashExecRequest, out: Capture, err: Capture) -> None:
        self.id = f"task-{next(self._ids)}"
        self.request = request
        self.proc = proc
        self._out = out
        self._err = err
        self._pumps = [
            asyncio.ensure_future(self._pump(proc.stdout, out)),
            asyncio.ensure_future(self._pump(proc.stderr, err)),
        ]
        self._reaped = asyncio.ensure_future(self._release(proc))

    @staticmethod
    async def _release(proc: asyncio.subprocess.Process) -> None:
        await proc.wait()
        _supervisor.release(proc.pid)  # reaped: what the task left running is no longer killed with dsh

    @staticmethod
    async def _pump(stream: asyncio.StreamReader | None, sink: Capture) -> None:
        try:
            if stream is not None:
                while chunk := await stream.read(_CHUNK):
                    sink.feed(chunk)
        finally:
            sink.finish()

    @property
    def stdout_spill(self) -> str | None:
        """The file holding the whole stdout, once it passed ``max_output`` characters (else None)."""
        return self._out.spilled_to

    @property
    def stderr_spill(self) -> str | None:
        """The file holding the whole stderr, once it passed ``max_output`` characters (else None)."""
        return self._err.spilled_to

    @property
    def exit_code(self) -> int | None:
        """The exit status (``128+N`` for signal N) once the command ended and all its output was read, else None."""
        if self.proc.returncode is None or not all(p.done() for p in self._pumps):
            return None
        return shell_status(self.proc.returncode)

    def read(self) -> tuple[str, str]:
        """Output (stdout, stderr) produced since the previous read: each at most ``max_output``
        characters, its tail after a note naming the spill file, when more came."""
        return self._out.take(), self._err.take()

    async def wait(self) -> int:
        """Wait for the command and its output to end; return the exit status (``128+N`` for signal N)."""
        code = await self.proc.wait()
        await asyncio.gather(*self._pumps)
        return shell_status(code)

    def kill(self) -> None:
        """Kill the whole process group at once (SIGKILL), without waiting: for an owner unloading."""
        kill_group(self.proc.pid)

    async def stop(self, grace: float = 2.0) -> int:
        """Terminate the process group (SIGTERM, then SIGKILL after ``grace`` seconds)."""
        if self.proc.returncode is None:
            kill_group(self.proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
            except TimeoutError:
                kill_group(self.proc.pid)
        kill_group(self.proc.pid)
        return await self.wait()


async def start_background(
    spec: BashExecSpec, request: BashExecRequest, out: Capture, err: Capture
) -> BackgroundProcess:
    """Start ``spec`` without waiting, its output into ``out`` and ``err``; see :class:`BackgroundProcess`."""
    proc = await spawn_async(spec)
    if spec.stdin is not None and proc.stdin is not None:
        proc.stdin.write(spec.stdin)
        proc.stdin.close()
    return BackgroundProcess(proc, request, out, err)
