"""The bash executor under bubblewrap: dsh-bash's local executor with its argv wrapped in ``bwrap``.

Everything but the argv is the local executor's own code (spawn, process group, timeouts, signals,
output bounds, spills): the sandbox adds the ``bwrap`` options in front of the shell's argv, checks
once that bubblewrap can create its namespaces here (failing closed otherwise), and marks the result.
"""

import os
import shutil
import subprocess
import threading
from collections.abc import Mapping
from typing import Any, Final, Literal, NamedTuple

from dsh.bash import (
    SHELL_EXECUTOR,
    Access,
    BashExecRequest,
    BashExecSpec,
    ExecError,
    ExecResult,
    LocalExecutor,
    LocalExecutorConfig,
    Mount,
    World,
    check_output_limits,
    executor_options,
)
from dsh.core import Context, Plugin

Mode = Literal["read-only", "workspace-write", "full"]
"""``read-only``: nothing writable but ``/dev/null`` and a private ``/tmp``; ``workspace-write``: also
the call's working directory; ``full``: no confinement at all (the result says so)."""

MODES: Final[tuple[Mode, ...]] = ("read-only", "workspace-write", "full")

DENIED_MARK: Final = "Read-only file system"
"""strerror(EROFS): what a write the sandbox refused reports (in the C locale and glibc's English)."""

PROBE_TIMEOUT: Final = 10.0
"""Seconds the one-time check that bubblewrap works may take."""


class SandboxError(ExecError):
    """The sandbox cannot be created (bubblewrap missing, or unable to create its namespaces): nothing ran."""

    def __init__(self, message: str, *, mode: Mode, bwrap: str) -> None:
        super().__init__(message, shell=bwrap)
        self.mode = mode
        """The configured mode."""
        self.bwrap = bwrap
        """The bubblewrap program that was tried."""


class SandboxExecutor(LocalExecutor):
    """Runs each command as the local executor does, inside a fresh bubblewrap sandbox.

    The sandbox sees the whole file system read-only (minus ``hide``), a private ``/tmp``, a
    minimal read-only ``/dev`` (``/dev/null`` stays writable), its own ``/proc``, no network unless
    ``network``, and no capabilities (a root harness's command cannot remount its way out). In
    ``workspace-write`` the call's working directory is bound writable; in ``read-only`` it is
    bound read-only, so it is visible even under ``/tmp``. ``full`` runs unconfined.
    """

    def __init__(
        self,
        mode: Mode = "read-only",
        *,
        network: bool = False,
        hide: tuple[str, ...] = (),
        bwrap: str = "bwrap",
        **local: Any,
    ) -> None:
        super().__init__(**local)
        if mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode: Mode = mode
        self.network = network
        self.hide = tuple(os.path.abspath(os.path.expanduser(p)) for p in hide)
        self.bwrap = bwrap
        self._ready = False
        self._lock = threading.Lock()
        self.world = self._world()

    def _world(self) -> World:
        if self.mode == "full":
            return World("local", label="the unconfined sandbox (mode full)")
        mounts = (Mount("/", "read"), Mount("/tmp", "none"))
        workspace: Access = "write" if self.mode == "workspace-write" else "read"
        return World("sandbox", mounts, workspace=workspace, hidden=self.hide, label=f"the {self.mode} sandbox")

    def options(self, cwd: str | None) -> tuple[str, ...]:
        """The ``bwrap`` options for a call in ``cwd`` (None: the namespaces alone, as the check runs them).

        The order is the world's: the root read-only, the working directory over it (before the
        sandbox's own ``/dev``, ``/proc`` and ``/tmp``, so a working directory of ``/`` cannot
        uncover them; again after the private ``/tmp`` when it lies under it), then ``hide`` last.
        """
        args = ["--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
        if self.network:
            args.append("--share-net")
        args += ["--ro-bind", "/", "/"]
        workspace: list[str] = []
        if cwd is not None:
            workspace = ["--bind" if self.mode == "workspace-write" else "--ro-bind", cwd, cwd]
        args += workspace
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        if cwd is not None and (cwd == "/tmp" or cwd.startswith("/tmp/")):
            args += workspace
        for path in self.hide:
            args += ["--tmpfs", path]
        args += ["--remount-ro", "/dev"]
        if cwd is not None:
            args += ["--chdir", cwd]
        return tuple(args)

    def spec(self, request: BashExecRequest) -> BashExecSpec:
        """The local executor's spec with its argv run by ``bwrap`` (``full``: unchanged)."""
        spec = super().spec(request)
        if self.mode == "full":
            return spec
        self.check()
        cwd = os.path.abspath(request.cwd) if request.cwd is not None else os.getcwd()
        return spec._replace(argv=(self.bwrap, *self.options(cwd), "--", *spec.argv))

    def check(self) -> None:
        """Fail closed: raise :class:`SandboxError` unless bubblewrap runs a sandbox of this mode here.

        Checked once per executor until it succeeds (a failure is checked again at the next call,
        so installing bubblewrap needs no restart).
        """
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            program = shutil.which(self.bwrap)
            if program is None:
                raise SandboxError(
                    f"the {self.mode} sandbox cannot run: bubblewrap ('{self.bwrap}') is not installed or not on "
                    "PATH; install it (Debian: apt-get install bubblewrap) or set the bash-sandbox config's bwrap",
                    mode=self.mode,
                    bwrap=self.bwrap,
                )
            try:
                done = subprocess.run(
                    (program, *self.options(None), "--", "true"),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=PROBE_TIMEOUT,
                    env={"PATH": os.environ.get("PATH", os.defpath)},
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = str(exc)
            else:
                if done.returncode == 0:
                    self._ready = True
                    return
                lines = done.stderr.decode(errors="replace").strip().splitlines()
                reason = lines[-1] if lines else f"exit status {done.returncode}"
            raise SandboxError(
                f"the {self.mode} sandbox cannot run: bubblewrap cannot create its namespaces here ({reason}); "
                "allow user namespaces (sysctl user.max_user_namespaces > 0, and on Debian/Ubuntu "
                "kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0), "
                "or use bash-local where running unconfined is intended",
                mode=self.mode,
                bwrap=self.bwrap,
            )

    async def run(self, request: BashExecRequest) -> ExecResult:
        """:meth:`LocalExecutor.run` in the sandbox; the result carries ``sandbox``."""
        return self._mark(await super().run(request), request)

    def run_sync(self, request: BashExecRequest) -> ExecResult:
        """:meth:`LocalExecutor.run_sync` in the sandbox; the result carries ``sandbox``."""
        return self._mark(super().run_sync(request), request)

    def _mark(self, result: ExecResult, request: BashExecRequest) -> ExecResult:
        confined = self.mode != "full"
        denied = confined and result.exit_code != 0 and (DENIED_MARK in result.stderr or DENIED_MARK in result.stdout)
        facts: Mapping[str, Any] = {
            "mode": self.mode,
            "confined": confined,
            "network": self.network or not confined,
            "denied": denied,
        }
        if not denied:
            return result._replace(sandbox=facts)
        if self.mode == "workspace-write":
            cwd = request.cwd or os.getcwd()
            room = f"only the working directory {cwd}, a private /tmp and /dev/null are writable"
        else:
            room = "only a private /tmp and /dev/null are writable"
        line = (
            f"dsh: the {self.mode} sandbox denied a write ({room}); "
            "the deployment's bash-sandbox mode decides what may be written"
        )
        stderr = result.stderr + ("\n" if result.stderr and not result.stderr.endswith("\n") else "") + line + "\n"
        return result._replace(stderr=stderr, sandbox=facts)


_LOCAL = LocalExecutorConfig()
"""The local executor's defaults, which this config's first fields repeat."""


class _SandboxConfig(NamedTuple):
    credential_pattern: str | None = _LOCAL.credential_pattern
    """Regex of ambient variable names to scrub; null keeps every name."""
    max_output: int = _LOCAL.max_output
    spill_dir: str | None = None
    """Where truncated output is spilled; default ``<DSH_HOME>/output``."""
    max_spill: int | None = None
    """Bytes of one stream's output kept in its spill file (default 256 MiB); the rest is counted and dropped."""
    spill_budget: int | None = None
    """Bytes the spill folder may hold (default 256 MiB) before the oldest finished spills are removed."""
    mode: Mode = "read-only"
    network: bool = False
    """Whether the sandbox shares the harness's network (off: only its own loopback)."""
    hide: tuple[str, ...] = ()
    """Directories replaced by an empty one inside the sandbox (``~/.ssh``, say)."""
    bwrap: str = "bwrap"
    """The bubblewrap program (a name on PATH or a path)."""


class SandboxConfig(_SandboxConfig):
    """Config of the ``bash-sandbox`` plugin (``mode`` and ``network`` are a contract); a checked record
    (``_replace`` and ``_make`` skip the checks).

    The first five fields are :class:`~dsh.bash.LocalExecutorConfig`'s, repeated (a NamedTuple
    inherits no fields; a test checks that they match) and checked as it checks them.
    """

    __slots__ = ()

    def __new__(
        cls,
        credential_pattern: str | None = _LOCAL.credential_pattern,
        max_output: int = _LOCAL.max_output,
        spill_dir: str | None = None,
        max_spill: int | None = None,
        spill_budget: int | None = None,
        mode: Mode = "read-only",
        network: bool = False,
        hide: tuple[str, ...] = (),
        bwrap: str = "bwrap",
    ) -> "SandboxConfig":
        check_output_limits(max_output, max_spill, spill_budget)
        return super().__new__(
            cls, credential_pattern, max_output, spill_dir, max_spill, spill_budget, mode, network, hide, bwrap
        )


def _apply(ctx: Context, config: SandboxConfig) -> None:
    executor = SandboxExecutor(
        config.mode,
        network=config.network,
        hide=tuple(config.hide),
        bwrap=config.bwrap,
        **executor_options(ctx, config),
    )
    ctx.provide(SHELL_EXECUTOR, executor)


plugin = Plugin(name="bash-sandbox", apply=_apply, Config=SandboxConfig)
"""Provides a configured :class:`SandboxExecutor` as ``shell_executor``."""
