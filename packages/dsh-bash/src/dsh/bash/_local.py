"""The local executor: runs bash or pwsh children on this machine."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import secrets
import signal
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dsh.core import DSH_HOME, Context, DshError, Plugin, ServiceKey
from dsh.paths import UntrustedPathError, create_private_file, ensure_private_dir, resolve_dsh_home

from ._env import DEFAULT_CREDENTIAL_PATTERN, Shell, build_child_env, compile_credential_pattern
from ._errors import ExecError
from ._request import BashExecRequest, BashExecSpec, ExecResult

DEFAULT_MAX_OUTPUT = 30_000
TIMEOUT_EXIT = 124
"""Exit status of a command its timeout killed (as GNU ``timeout``)."""
DRAIN_GRACE = 2.0
"""Seconds to keep reading a killed group's output; a process that escaped the group may hold the pipes."""

SPILL_MAX_AGE = 7 * 24 * 3600
"""Spilled output older than this (seconds) is removed when the next spill is written."""
SPILL_MAX_BYTES = 256 * 1024 * 1024
"""Past this total, the oldest spilled files are removed when the next spill is written."""

_SPILL_NAME = re.compile(r"[0-9a-f]{32}\.[a-z]+")
"""The names :func:`spill` writes; retention never touches any other file of the folder."""


def spill(directory: Path, data: bytes, stream: str) -> Path:
    """Write ``data`` to a new private file under ``directory`` and apply the retention rule.

    The directory is created 0700 and checked like the home; the file is created exclusively,
    0600, under an unpredictable name, never through a symbolic link.
    """
    try:
        ensure_private_dir(directory, "output directory")
        path = directory / f"{secrets.token_hex(16)}.{stream}"
        with os.fdopen(create_private_file(path), "wb") as fh:
            fh.write(data)
    except UntrustedPathError as exc:
        raise ExecError(str(exc), path=str(exc.path)) from None
    except OSError as exc:
        raise ExecError(
            f"cannot spill {stream} under {directory}: {exc.strerror or exc}", path=str(directory)
        ) from None
    _prune(directory, keep=path)
    return path


def _prune(directory: Path, keep: Path) -> None:
    """Remove spills past :data:`SPILL_MAX_AGE`, then the oldest while the total passes :data:`SPILL_MAX_BYTES`."""
    now = time.time()
    files: list[tuple[float, int, str]] = []
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                ours = _SPILL_NAME.fullmatch(entry.name) is not None
                if ours and entry.is_file(follow_symlinks=False) and entry.path != str(keep):
                    files.append((info.st_mtime, info.st_size, entry.path))
    total = sum(size for _, size, _ in files) + keep.stat().st_size
    for mtime, size, path in sorted(files):
        if now - mtime > SPILL_MAX_AGE or total > SPILL_MAX_BYTES:
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size


def shell_argv(shell: Shell, command: str) -> tuple[str, ...]:
    """The non-interactive argv for ``command``: no profile or rc files, no pwsh logo."""
    if shell == "pwsh":
        return ("pwsh", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", command)
    # `--` ends bash's options, so a command line starting with `-` is run, never read as an option.
    return ("bash", "--noprofile", "--norc", "-c", "--", command)


class Executor(Protocol):
    """What a shell executor provides as the ``shell_executor`` service."""

    async def run(self, request: BashExecRequest) -> ExecResult:
        """Run in the foreground and return how it ended."""
        ...

    async def start(self, request: BashExecRequest) -> BackgroundProcess:
        """Start in the background and return a handle at once."""
        ...


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _communicate(proc: asyncio.subprocess.Process, stdin: bytes | None, out: bytearray, err: bytearray) -> None:
    """Feed ``stdin``, read both streams into ``out``/``err`` as they come, and wait for the exit."""

    async def pump(stream: asyncio.StreamReader | None, sink: bytearray) -> None:
        if stream is not None:
            while chunk := await stream.read(65536):
                sink += chunk

    async def feed() -> None:
        if proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if stdin:
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            proc.stdin.close()

    await asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err), feed(), proc.wait())


async def _drain(proc: asyncio.subprocess.Process, work: asyncio.Future[None]) -> None:
    """After the group was killed: read what is left for a moment, then reap the command."""
    await asyncio.wait({work}, timeout=DRAIN_GRACE)
    if not work.done():
        work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work
    with contextlib.suppress(TimeoutError, ProcessLookupError):
        await asyncio.wait_for(proc.wait(), DRAIN_GRACE)


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
        """The exit status once the command ended and all its output was read, else None."""
        if self.proc.returncode is None or not all(p.done() for p in self._pumps):
            return None
        return self.proc.returncode

    def read(self) -> tuple[str, str]:
        """Output (stdout, stderr) produced since the previous read."""
        out = b"".join(self._out[self._read_out :])
        err = b"".join(self._err[self._read_err :])
        self._read_out, self._read_err = len(self._out), len(self._err)
        return out.decode(errors="replace"), err.decode(errors="replace")

    async def wait(self) -> int:
        """Wait for the command and its output to end; return the exit status."""
        code = await self.proc.wait()
        await asyncio.gather(*self._pumps)
        return code

    def kill(self) -> None:
        """Kill the whole process group at once (SIGKILL), without waiting: for an owner unloading."""
        _kill_group(self.proc.pid)

    async def stop(self, grace: float = 2.0) -> int:
        """Terminate the process group (SIGTERM, then SIGKILL after ``grace`` seconds)."""
        if self.proc.returncode is None:
            _kill_group(self.proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
            except TimeoutError:
                _kill_group(self.proc.pid)
        _kill_group(self.proc.pid)
        return await self.wait()


AMBIENT_ENV: ContextVar[Mapping[str, str] | None] = ContextVar("dsh_ambient_env", default=None)
"""The caller's environment, when it is not this process's (a ``dsh exec`` served by ``dsh serve``).

Executors without an explicit ``ambient`` build children from it when set, else from ``os.environ``.
"""


class LocalExecutor:
    """Runs commands as local child processes, each in its own process group.

    The child environment is built by :func:`~dsh.bash.build_child_env` from the ambient
    environment at call time; :data:`os.environ` is never modified.
    """

    def __init__(
        self,
        *,
        credential_pattern: str | None = DEFAULT_CREDENTIAL_PATTERN,
        max_output: int = DEFAULT_MAX_OUTPUT,
        spill_dir: str | os.PathLike[str] | None = None,
        ambient: Mapping[str, str] | None = None,
    ) -> None:
        self.credentials = compile_credential_pattern(credential_pattern)
        self.max_output = max_output
        # Never a shared temporary directory: another user could pre-create or read it.
        self.spill_dir = (
            Path(os.path.expanduser(spill_dir)).absolute() if spill_dir is not None else resolve_dsh_home() / "output"
        )
        self._ambient = ambient

    def spec(self, request: BashExecRequest) -> BashExecSpec:
        """The exact argv, environment, cwd and input a request turns into."""
        ambient = self._ambient if self._ambient is not None else (AMBIENT_ENV.get() or os.environ)
        env = build_child_env(
            ambient,
            request.env,
            request.dsh_env,
            shell=request.shell,
            credentials=self.credentials,
        )
        return BashExecSpec(
            argv=shell_argv(request.shell, request.command),
            env=env,
            cwd=request.cwd,
            stdin=None if request.stdin is None else request.stdin.encode(),
            timeout=request.timeout,
        )

    async def _spawn(self, spec: BashExecSpec) -> asyncio.subprocess.Process:
        if spec.cwd is not None and not os.path.isdir(spec.cwd):
            raise ExecError(f"working directory {spec.cwd} does not exist", path=spec.cwd)
        try:
            return await asyncio.create_subprocess_exec(
                *spec.argv,
                stdin=asyncio.subprocess.PIPE if spec.stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(spec.env),
                cwd=spec.cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise ExecError(f"shell '{spec.argv[0]}' was not found on PATH", shell=spec.argv[0]) from None

    async def run(self, request: BashExecRequest) -> ExecResult:
        """Run to completion, timeout or cancellation; the last two kill the whole process group.

        Output read before a timeout is kept. The exit status follows the shell: the command's own,
        ``128+N`` when signal N killed it, :data:`TIMEOUT_EXIT` (124, as GNU ``timeout``) when the
        timeout did. A cancelled run (the caller was interrupted) kills the group, reaps the
        command, and re-raises :class:`asyncio.CancelledError`.
        """
        spec = self.spec(request)
        started = time.monotonic()
        spawning = asyncio.ensure_future(self._spawn(spec))
        try:
            proc = await asyncio.shield(spawning)
        except asyncio.CancelledError:
            # Cancelled while asyncio was still wiring the pipes: the child may be running already.
            # Never leave it behind (asyncio would kill only the leader and wait on its pipes).
            with contextlib.suppress(Exception):
                child = await spawning
                _kill_group(child.pid)
                await _drain(child, asyncio.ensure_future(_communicate(child, None, bytearray(), bytearray())))
            raise
        out, err = bytearray(), bytearray()
        work = asyncio.ensure_future(_communicate(proc, spec.stdin, out, err))
        timed_out = False
        try:
            done, _ = await asyncio.wait({work}, timeout=spec.timeout)
            if not done:
                timed_out = True
                _kill_group(proc.pid)
                await _drain(proc, work)
            else:
                work.result()
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            with contextlib.suppress(asyncio.CancelledError):
                await _drain(proc, work)
            raise
        if timed_out:
            code = TIMEOUT_EXIT
        elif proc.returncode is None:
            code = 128 + signal.SIGKILL
        else:
            code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        stdout, stdout_spill = self._trim(bytes(out), "stdout")
        stderr, stderr_spill = self._trim(bytes(err), "stderr")
        return ExecResult(
            exit_code=code,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            duration=time.monotonic() - started,
            stdout_spill=stdout_spill,
            stderr_spill=stderr_spill,
        )

    async def start(self, request: BashExecRequest) -> BackgroundProcess:
        """Start without waiting; see :class:`BackgroundProcess`."""
        spec = self.spec(request)
        proc = await self._spawn(spec)
        if spec.stdin is not None and proc.stdin is not None:
            proc.stdin.write(spec.stdin)
            proc.stdin.close()
        return BackgroundProcess(proc, request)

    def _trim(self, data: bytes, stream: str) -> tuple[str, str | None]:
        text = data.decode(errors="replace")
        if len(text) <= self.max_output:
            return text, None
        shown = f"[{stream} truncated: showing the last {self.max_output} of {len(text)} characters"
        tail = text[-self.max_output :]
        try:
            path = spill(self.spill_dir, data, stream)
        except DshError as exc:
            # The command has run: keep what can be shown rather than lose its whole result.
            return f"{shown}; the full text was not kept: {exc}]\n" + tail, None
        return f"{shown}; full text in {path}]\n" + tail, str(path)


SHELL_EXECUTOR: ServiceKey[Executor] = ServiceKey("shell_executor")
"""The executor service; tools fall back to a default :class:`LocalExecutor` without one."""


@dataclass(frozen=True, kw_only=True)
class LocalExecutorConfig:
    """Config of the ``bash-local`` plugin."""

    credential_pattern: str | None = DEFAULT_CREDENTIAL_PATTERN
    """Regex of ambient variable names to scrub; null keeps every name."""
    max_output: int = DEFAULT_MAX_OUTPUT
    spill_dir: str | None = None
    """Where truncated output is spilled; default ``<DSH_HOME>/output``."""


def _apply(ctx: Context, config: LocalExecutorConfig) -> None:
    home = ctx.get(DSH_HOME)
    spill = config.spill_dir or (str(home / "output") if home is not None else None)
    ctx.provide(
        SHELL_EXECUTOR,
        LocalExecutor(credential_pattern=config.credential_pattern, max_output=config.max_output, spill_dir=spill),
    )


local_executor_plugin = Plugin(name="bash-local", apply=_apply, Config=LocalExecutorConfig)
"""Provides a configured :class:`LocalExecutor` as ``shell_executor``."""
