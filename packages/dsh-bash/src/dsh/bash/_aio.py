"""Waiting for children under asyncio: overlapping calls (``dsh run``, ``dsh serve``, hooks) and background tasks."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal

from ._child import DRAIN_GRACE, EXIT_GRACE, POLL, Ended, kill_group, shell_status
from ._errors import ExecError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._capture import Capture
    from ._request import BashExecRequest, BashExecSpec


async def spawn_async(
    spec: BashExecSpec, stdout: int = asyncio.subprocess.PIPE, stderr: int = asyncio.subprocess.PIPE
) -> asyncio.subprocess.Process:
    """Start ``spec`` in its own process group, its output on pipes (asyncio's, or the descriptors given)."""
    if spec.cwd is not None and not os.path.isdir(spec.cwd):
        raise ExecError(f"working directory {spec.cwd} does not exist", path=spec.cwd)
    try:
        return await asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.PIPE if spec.stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=dict(spec.env),
            cwd=spec.cwd,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise ExecError(f"shell '{spec.argv[0]}' was not found on PATH", shell=spec.argv[0]) from None


class _Pipes:
    """The output pipes of a foreground command, ours rather than asyncio's: we stop reading them when we choose.

    (asyncio's own pipes stay open, and its ``wait()`` waits on them, as long as any process holds them.)
    """

    def __init__(self) -> None:
        self.out_r, self.out_w = os.pipe()
        self.err_r, self.err_w = os.pipe()
        self.writers = [self.out_w, self.err_w]
        self.files = [open(self.out_r, "rb", buffering=0), open(self.err_r, "rb", buffering=0)]  # noqa: SIM115

    def spawned(self) -> None:
        """The child holds the write ends now; ours would keep the pipes from ever ending. Once only:
        a descriptor number closed twice may by then be someone else's file."""
        writers, self.writers = self.writers, []
        for fd in writers:
            os.close(fd)

    def close(self) -> None:
        self.spawned()
        for fh in self.files:
            fh.close()


async def _communicate(
    proc: asyncio.subprocess.Process,
    stdin: bytes | None,
    pipes: _Pipes,
    sinks: tuple[Capture | None, Capture | None],
    grace: list[float],
) -> None:
    """Feed ``stdin`` and read both pipes into ``sinks`` (None: discard) as they come, until the exit.

    Once the shell itself has exited, the pipes are read for ``grace[0]`` seconds at most (the
    caller raises it after killing the group): a process left behind may hold them for ever.
    """
    loop = asyncio.get_running_loop()

    async def pump(fh: object, sink: Capture | None) -> None:
        reader = asyncio.StreamReader(loop=loop)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), fh)
        try:
            while chunk := await reader.read(65536):
                if sink is not None:
                    sink.feed(chunk)
        finally:
            transport.close()

    async def feed() -> None:
        if proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if stdin:
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            proc.stdin.close()

    pumps = {asyncio.ensure_future(pump(fh, sink)) for fh, sink in zip(pipes.files, sinks, strict=True)}
    feeder = asyncio.ensure_future(feed())
    try:
        while not all(p.done() for p in pumps):
            if proc.returncode is not None:
                await asyncio.wait(pumps, timeout=grace[0])
                break
            await asyncio.wait(pumps, timeout=POLL)
        for p in pumps:
            if p.done():
                p.result()
        await proc.wait()
    finally:
        for task in (*pumps, feeder):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*pumps, return_exceptions=True)
        pipes.close()


async def _drain(proc: asyncio.subprocess.Process, work: asyncio.Future[None]) -> None:
    """After the group was killed: read what is left for a moment, then reap the command."""
    await asyncio.wait({work}, timeout=DRAIN_GRACE + POLL)
    if not work.done():
        work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work
    with contextlib.suppress(TimeoutError, ProcessLookupError):
        await asyncio.wait_for(proc.wait(), DRAIN_GRACE)


async def wait_async(spec: BashExecSpec, out: Capture, err: Capture) -> Ended:
    """Spawn ``spec`` and wait for it or its timeout, its output into ``out``/``err``.

    A cancelled wait kills and reaps the group, then re-raises.
    """
    pipes = _Pipes()
    spawning = asyncio.ensure_future(spawn_async(spec, pipes.out_w, pipes.err_w))
    spawning.add_done_callback(lambda _: pipes.spawned())
    grace = [EXIT_GRACE]
    try:
        proc = await asyncio.shield(spawning)
    except BaseException as exc:
        if not isinstance(exc, asyncio.CancelledError):
            pipes.close()
            raise
        # Cancelled while asyncio was still wiring the pipes: the child may be running already.
        # Never leave it behind (asyncio would kill only the leader and wait on its pipes).
        with contextlib.suppress(Exception):
            child = await spawning
            kill_group(child.pid)
            await _drain(child, asyncio.ensure_future(_communicate(child, None, pipes, (None, None), [DRAIN_GRACE])))
        pipes.close()
        raise
    work = asyncio.ensure_future(_communicate(proc, spec.stdin, pipes, (out, err), grace))
    timed_out = False
    try:
        done, _ = await asyncio.wait({work}, timeout=spec.timeout)
        if not done and proc.returncode is not None:  # it exited; only its pipes were held: stop reading
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
        elif not done:
            timed_out = True
            grace[0] = DRAIN_GRACE
            kill_group(proc.pid)
            await _drain(proc, work)
        else:
            work.result()
    except asyncio.CancelledError:
        grace[0] = DRAIN_GRACE
        kill_group(proc.pid)
        with contextlib.suppress(asyncio.CancelledError):
            await _drain(proc, work)
        raise
    return Ended(proc.returncode, timed_out)


class BackgroundProcess:
    """A command running in the background; its output accumulates until read."""

    _ids = itertools.count(1)

    def __init__(self, proc: asyncio.subprocess.Process, request: BashExecRequest) -> None:
        self.id = f"task-{next(self._ids)}"
        self.request = request
        self.proc = proc
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._read_out = 0
        self._read_err = 0
        self._pumps = [
            asyncio.ensure_future(self._pump(proc.stdout, self._out)),
            asyncio.ensure_future(self._pump(proc.stderr, self._err)),
        ]

    @staticmethod
    async def _pump(stream: asyncio.StreamReader | None, sink: list[bytes]) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            sink.append(chunk)

    @property
    def exit_code(self) -> int | None:
        """The exit status (``128+N`` for signal N) once the command ended and all its output was read, else None."""
        if self.proc.returncode is None or not all(p.done() for p in self._pumps):
            return None
        return shell_status(self.proc.returncode)

    def read(self) -> tuple[str, str]:
        """Output (stdout, stderr) produced since the previous read."""
        out = b"".join(self._out[self._read_out :])
        err = b"".join(self._err[self._read_err :])
        self._read_out, self._read_err = len(self._out), len(self._err)
        return out.decode(errors="replace"), err.decode(errors="replace")

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


async def start_background(spec: BashExecSpec, request: BashExecRequest) -> BackgroundProcess:
    """Start ``spec`` without waiting; see :class:`BackgroundProcess`."""
    proc = await spawn_async(spec)
    if spec.stdin is not None and proc.stdin is not None:
        proc.stdin.write(spec.stdin)
        proc.stdin.close()
    return BackgroundProcess(proc, request)
