"""The local executor: runs bash or pwsh children on this machine, with or without an event loop."""

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from dsh.core import Context, FieldError, Plugin, ServiceKey
from dsh.paths import resolve_dsh_home
from dsh.paths.interrupts import Interrupted, Interrupts, interrupted_status, interruption
from dsh.session import DSH_HOME

from ._capture import Capture
from ._child import Ended, close_passed
from ._env import DEFAULT_CREDENTIAL_PATTERN, Shell, build_child_env, compile_credential_pattern
from ._request import BashExecRequest, BashExecSpec, ExecResult
from ._world import LOCAL_WORLD, World

if TYPE_CHECKING:
    from .aio import BackgroundProcess

DEFAULT_MAX_OUTPUT = 30_000


def shell_argv(shell: Shell, command: str) -> tuple[str, ...]:
    """The non-interactive argv for ``command``: no profile or rc files, no pwsh logo."""
    if shell == "pwsh":
        return ("pwsh", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", command)
    # `--` ends bash's options, so a command line starting with `-` is run, never read as an option.
    return ("bash", "--noprofile", "--norc", "-c", "--", command)


class Executor(Protocol):
    """What a shell executor provides as the ``shell_executor`` service.

    An executor may also offer ``run_sync(request) -> ExecResult``, the same run without an event
    loop: a caller driven without one (:func:`~dsh.bash.driven_blocking`) calls it instead of
    ``run``, so a one-shot ``dsh exec`` needs no asyncio (see :class:`LocalExecutor`). One whose
    children do not run on this machine as they are (a sandbox, a remote host) says so with a
    ``world`` attribute (a :class:`~dsh.bash.World`); without one it is local (:func:`~dsh.bash.world_of`).
    """

    async def run(self, request: BashExecRequest) -> ExecResult:
        """Run in the foreground and return how it ended."""
        ...

    async def start(self, request: BashExecRequest) -> "BackgroundProcess":
        """Start in the background and return a handle at once."""
        ...


class LocalExecutor:
    """Runs commands as local child processes, each in its own process group.

    The child environment is built by :func:`~dsh.bash.build_child_env` from the ambient
    environment at call time; :data:`os.environ` is never modified. :meth:`run` waits under
    asyncio, :meth:`run_sync` without an event loop; both keep one contract.
    """

    world: World = LOCAL_WORLD
    """Where the children run: this machine, every harness path as it is."""

    def __init__(
        self,
        *,
        credential_pattern: str | None = DEFAULT_CREDENTIAL_PATTERN,
        max_output: int = DEFAULT_MAX_OUTPUT,
        spill_dir: str | os.PathLike[str] | None = None,
        max_spill: int | None = None,
        ambient: Mapping[str, str] | None = None,
        spill_budget: int | None = None,
    ) -> None:
        check_output_limits(max_output, max_spill, spill_budget)  # a Python caller gets the config's checks
        self.credentials = compile_credential_pattern(credential_pattern)
        self.max_output = max_output
        self.max_spill = max_spill
        """Bytes of one stream kept in its spill file; the rest is counted and dropped. None: ``SPILL_MAX_BYTES``."""
        self.spill_budget = spill_budget
        """Bytes the spill folder may hold before the oldest finished spills are removed. None: ``SPILL_MAX_BYTES``."""
        # Never a shared temporary directory: another user could pre-create or read it.
        self.spill_dir = (
            Path(os.path.expanduser(spill_dir)).absolute() if spill_dir is not None else resolve_dsh_home() / "output"
        )
        self._ambient = ambient

    def spec(self, request: BashExecRequest) -> BashExecSpec:
        """The exact argv, environment, cwd and input a request turns into."""
        ambient = self._ambient if self._ambient is not None else request.ambient
        if ambient is None:
            ambient = os.environ
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

    async def run(self, request: BashExecRequest) -> ExecResult:
        """Run to completion, timeout or cancellation; the last two kill the whole process group.

        Output read before a timeout is kept. The exit status follows the shell: the command's own,
        ``128+N`` when signal N killed it, 124 (as GNU ``timeout``) when the timeout did. A
        cancelled run (the caller was interrupted) kills the group, reaps the command, and raises
        ``CommandCancelled``, an :class:`asyncio.CancelledError` carrying what it printed.
        """
        from .aio import CommandCancelled, wait_async

        spec = self.spec(request)
        started = time.monotonic()
        try:
            out, err = self.captures()
        except BaseException:
            close_passed(spec)  # never spawned: the descriptors it would have handed on are ours to close
            raise
        Interrupts.command_started()  # a cancellation from now on kills a command, not the start-up
        try:
            ended = await wait_async(spec, out, err)
        except BaseException as exc:
            reason = interruption(exc)
            if reason is None:
                out.discard()
                err.discard()
                raise
            # The group was killed and what it printed drained: that output goes with the cancellation.
            raise CommandCancelled(reason, self._interrupted(reason, out, err, started)) from exc
        return self.result(ended, out, err, started)

    def run_sync(self, request: BashExecRequest) -> ExecResult:
        """:meth:`run` without an event loop, blocking the calling thread.

        On the main thread inside an active :class:`~dsh.bash.Interrupts`, a signal kills the
        group, reaps the command and raises :class:`~dsh.bash.Interrupted` carrying what it printed.
        """
        from ._blocking import wait_blocking

        spec = self.spec(request)
        started = time.monotonic()
        try:
            Interrupts.checkpoint()  # a signal came while the call was prepared: nothing starts
            out, err = self.captures()
        except BaseException:
            close_passed(spec)  # never spawned: the descriptors it would have handed on are ours to close
            raise
        try:
            # From the spawn on a signal is kept until the wait, which kills the group; one that comes
            # after the command ended is kept and no longer interrupts the turn (it ran; it is recorded).
            with Interrupts.protected():
                Interrupts.command_started()
                ended = wait_blocking(spec, out, err)
            return self.result(ended, out, err, started)
        except Interrupted as exc:
            # The group was killed and what it printed drained: that output goes with the interruption.
            exc.result = self._interrupted(exc.reason, out, err, started)
            raise
        except BaseException:
            out.discard()
            err.discard()
            raise

    async def start(self, request: BashExecRequest) -> "BackgroundProcess":
        """Start without waiting; see :class:`~dsh.bash.BackgroundProcess`."""
        from .aio import start_background

        captures = self.captures()  # first: the spec may hold descriptors only its spawn closes
        return await start_background(self.spec(request), request, *captures)

    def captures(self) -> tuple[Capture, Capture]:
        """Fresh bounded captures of stdout and stderr with this executor's output limit and spill settings."""
        return tuple(  # type: ignore[return-value]
            Capture(
                stream,
                max_output=self.max_output,
                spill_dir=self.spill_dir,
                max_spill=self.max_spill,
                spill_budget=self.spill_budget,
            )
            for stream in ("stdout", "stderr")
        )

    @classmethod
    def _interrupted(cls, reason: str, out: Capture, err: Capture, started: float) -> ExecResult:
        """What a command printed before an interruption (``reason``) killed its group, as ``128+N``."""
        result = cls.result(Ended(None, False), out, err, started)
        return result._replace(exit_code=interrupted_status(reason))

    @staticmethod
    def result(ended: Ended, out: Capture, err: Capture, started: float) -> ExecResult:
        """The result of a command that ended as ``ended``, its output read into ``out`` and ``err``
        (an executor that carries the command elsewhere, over SSH say, shapes its result here too)."""
        stdout, stdout_spill = out.result()
        stderr, stderr_spill = err.result()
        if ended.note is not None:
            stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + ended.note + "\n"
        return ExecResult(
            exit_code=ended.exit_code,
            stdout=stdout,
            stderr=stderr,
            timed_out=ended.timed_out,
            duration=time.monotonic() - started,
            stdout_spill=stdout_spill,
            stderr_spill=stderr_spill,
            status_known=ended.known,
        )


SHELL_EXECUTOR: ServiceKey[Executor] = ServiceKey("shell_executor")
"""The executor service; tools fall back to a default :class:`LocalExecutor` without one."""


class _LocalExecutorConfig(NamedTuple):
    credential_pattern: str | None = DEFAULT_CREDENTIAL_PATTERN
    """Regex of ambient variable names to scrub; null keeps every name."""
    max_output: int = DEFAULT_MAX_OUTPUT
    """Characters of each stream a result shows (its tail); at least 1."""
    spill_dir: str | None = None
    """Where truncated output is spilled; default ``<DSH_HOME>/output``."""
    max_spill: int | None = None
    """Bytes of one stream's output kept in its spill file (default 256 MiB); the rest is counted and dropped."""
    spill_budget: int | None = None
    """Bytes the spill folder may hold (default 256 MiB) before the oldest finished spills are removed."""


def check_output_limits(max_output: int, max_spill: int | None, spill_budget: int | None) -> None:
    """Refuse output limits that mean nothing, naming the field (the one check of every executor's config).

    ``max_output`` shows the last that many characters, so it must be at least 1 (0 and below once
    printed "showing the last -1 of 0 characters" above every empty stream, and at 0 still showed a few);
    a spill cap of 0 keeps none of a stream in its (empty) spill file, a budget of 0 keeps no finished
    spill, and below 0 is nonsense.
    """
    if max_output < 1:
        raise FieldError("max_output", "must be at least 1")
    for name, value in (("max_spill", max_spill), ("spill_budget", spill_budget)):
        if value is not None and value < 0:
            raise FieldError(name, "must be 0 or more (or null for the default)")


class LocalExecutorConfig(_LocalExecutorConfig):
    """Config of the ``bash-local`` plugin; a checked record (``_replace`` and ``_make`` skip the checks).

    Executors built on the local one (dsh-bash-sandbox's, dsh-bash-ssh's) repeat these fields first
    in their own configs (a NamedTuple inherits no fields), and check them with
    :func:`check_output_limits`; their tests check that the fields match.
    """

    __slots__ = ()

    def __new__(
        cls,
        credential_pattern: str | None = DEFAULT_CREDENTIAL_PATTERN,
        max_output: int = DEFAULT_MAX_OUTPUT,
        spill_dir: str | None = None,
        max_spill: int | None = None,
        spill_budget: int | None = None,
    ) -> "LocalExecutorConfig":
        check_output_limits(max_output, max_spill, spill_budget)
        return super().__new__(cls, credential_pattern, max_output, spill_dir, max_spill, spill_budget)


class ExecutorSettings(Protocol):
    """What :func:`executor_options` reads: :class:`LocalExecutorConfig`'s fields, in any config repeating them."""

    @property
    def credential_pattern(self) -> str | None: ...
    @property
    def max_output(self) -> int: ...
    @property
    def spill_dir(self) -> str | None: ...
    @property
    def max_spill(self) -> int | None: ...
    @property
    def spill_budget(self) -> int | None: ...


def executor_options(ctx: Context, config: ExecutorSettings) -> dict[str, Any]:
    """The :class:`LocalExecutor` keyword arguments ``config`` means in ``ctx`` (spills default to the
    deployment's ``<DSH_HOME>/output``); executors built on it (a sandbox, a remote host) share them."""
    home = ctx.get(DSH_HOME)
    return {
        "credential_pattern": config.credential_pattern,
        "max_output": config.max_output,
        "spill_dir": config.spill_dir or (str(home / "output") if home is not None else None),
        "max_spill": config.max_spill,
        "spill_budget": config.spill_budget,
    }


def _apply(ctx: Context, config: LocalExecutorConfig) -> None:
    ctx.provide(SHELL_EXECUTOR, LocalExecutor(**executor_options(ctx, config)))


local_executor_plugin = Plugin(name="bash-local", apply=_apply, Config=LocalExecutorConfig)
"""Provides a configured :class:`LocalExecutor` as ``shell_executor``."""
