"""The bash executor under bubblewrap: dsh-bash's local executor with its argv wrapped in ``bwrap``.

Everything but the argv is the local executor's own code (spawn, process group, timeouts, signals,
output bounds, spills): the sandbox adds the ``bwrap`` options in front of the shell's argv, checks
once that bubblewrap can create its namespaces here (failing closed otherwise), and marks the result.

The writable set is the deployment's, never the call's: the session's workspace (the request's
``workspace``, from the session's header) and the configured ``writable_roots``; a call's working
directory only moves the command (see :meth:`SandboxExecutor.layout`).
"""

import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
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
from dsh.paths import UntrustedPathError, check_trusted, resolve_dsh_home, trusted_paths
from dsh.session import DSH_HOME

from ._protect import ProtectError, _under, links_on_way, protect_options, protected_in
from ._seccomp import FilterError, filter_fd, unix_socket_filter

Mode = Literal["read-only", "workspace-write", "full"]
"""``read-only``: nothing writable but ``/dev/null`` and a private ``/tmp``; ``workspace-write``: also
the session's workspace and the deployment's ``writable_roots``; ``full``: no confinement at all (the
result says so)."""

MODES: Final[tuple[Mode, ...]] = ("read-only", "workspace-write", "full")

DENIED_MARK: Final = "Read-only file system"
"""strerror(EROFS): what a write the sandbox refused reports (in the C locale and glibc's English)."""

PROBE_TIMEOUT: Final = 10.0
"""Seconds the one-time check that bubblewrap works may take."""

_LISTENING: Final = 0x10000
"""``__SO_ACCEPTCON`` in ``/proc/net/unix``'s flags: a socket that listens."""


class SandboxError(ExecError):
    """The sandbox cannot be created (bubblewrap missing, or unable to create its namespaces), or
    refuses this call (a working directory it does not show, a protected path it cannot keep): nothing ran."""

    def __init__(self, message: str, *, mode: Mode, bwrap: str) -> None:
        super().__init__(message, shell=bwrap)
        self.mode = mode
        """The configured mode."""
        self.bwrap = bwrap
        """The bubblewrap program that was tried."""


def find_program(name: str, skip: Sequence[str]) -> str:
    """The absolute, resolved sandbox program ``name`` names, checked by the trust rule; else ValueError.

    A name with a ``/`` is that path; a bare name is looked up in ``PATH``, skipping relative
    entries and every entry inside ``skip`` (the writable roots known now, and the current
    directory: where a confined command could have put a program of that name).
    """
    candidate = os.path.abspath(os.path.expanduser(name)) if "/" in name else _on_path(name, skip)
    if "/" in name and not os.path.isfile(candidate):
        raise ValueError(f"bubblewrap ('{name}') is not installed at {candidate}")
    program = os.path.realpath(candidate)
    try:
        check_trusted(program, "sandbox program")
    except UntrustedPathError as exc:
        raise ValueError(str(exc)) from None
    return program


def _on_path(name: str, skip: Sequence[str]) -> str:
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isabs(entry) or any(_under(os.path.realpath(entry), root) for root in skip):
            continue
        path = os.path.join(entry, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise ValueError(f"bubblewrap ('{name}') is not installed or not on PATH (outside the writable roots)")


def _own_code(roots: Sequence[str]) -> list[str]:
    """dsh's own interpreter and import path inside ``roots`` (a project venv that holds dsh), as ``protect`` entries.

    What this process imports and runs next time (``sys.prefix``: a venv's ``pyvenv.cfg``, its
    ``bin`` and ``site-packages``; every ``sys.path`` entry, with its ``.pth`` files) must not be a
    confined command's to write. An entry that *is* a root (``python -m`` puts the current folder
    first) is left out: keeping the whole workspace read-only would leave no sandbox worth having;
    the README names this limit.
    """
    found: dict[str, None] = {}
    for entry in (sys.prefix, sys.exec_prefix, *sys.path):
        real = os.path.realpath(entry or ".")
        if any(_under(real, root) and real != root for root in roots):
            found[real + "/" if os.path.isdir(real) else real] = None
    return list(found)


class Layout(NamedTuple):
    """Where one call runs: its resolved working directory, the session's workspace, and what is writable."""

    cwd: str
    workspace: str | None
    roots: tuple[str, ...]
    search: tuple[str, ...] = ()
    """The ``PATH`` folders (as named) that lie in ``roots``, or pass through a symbolic link there:
    dsh finds programs it runs on the host there (the shell, hook programs), so they stay read-only
    (and a link on the way, which a confined command could re-point, is refused)."""


def _search_path(environments: Sequence[Mapping[str, str]], roots: Sequence[str]) -> tuple[str, ...]:
    """The folders of each environment's ``PATH`` that lie in ``roots`` or are reached through a link
    there; ValueError names a relative entry."""
    found: dict[str, None] = {}
    for env in environments:
        for entry in env.get("PATH", os.defpath).split(os.pathsep):
            if not os.path.isabs(entry):
                raise ValueError(entry or "(empty)")
            places = (os.path.normpath(entry), os.path.realpath(entry), *links_on_way(entry))
            if any(_under(place, root) for place in places for root in roots):
                found[os.path.normpath(entry)] = None
    return tuple(found)


class SandboxExecutor(LocalExecutor):
    """Runs each command as the local executor does, inside a fresh bubblewrap sandbox.

    The sandbox sees the whole file system read-only (minus ``hide``), a private ``/tmp``, a
    minimal read-only ``/dev`` (``/dev/null`` stays writable), its own ``/proc``, no network unless
    ``network``, no capabilities (a root harness's command cannot remount its way out), and no Unix
    socket of its own making (a seccomp filter). In ``workspace-write`` the session's workspace and
    ``writable_roots`` are writable, less what :mod:`._protect` keeps read-only; in ``read-only`` the
    workspace is bound read-only, so it is visible even under ``/tmp``. ``full`` runs unconfined.
    """

    def __init__(
        self,
        mode: Mode = "read-only",
        *,
        network: bool = False,
        hide: tuple[str, ...] = (),
        bwrap: str = "bwrap",
        writable_roots: tuple[str, ...] = (),
        protect: tuple[str, ...] = (),
        allow_unix_sockets: tuple[str, ...] = (),
        home: str | os.PathLike[str] | None = None,
        **local: Any,
    ) -> None:
        super().__init__(**local)
        if mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode: Mode = mode
        self.network = network
        self.hide_entries = tuple(hide)
        """The ``hide`` entries as configured (messages name them so)."""
        self.hide = tuple(os.path.realpath(os.path.expanduser(p)) for p in hide)
        self.writable_roots = tuple(os.path.realpath(os.path.expanduser(p)) for p in writable_roots)
        self.protect = tuple(protect)
        self.allow_unix_sockets = frozenset(os.path.realpath(os.path.expanduser(p)) for p in allow_unix_sockets)
        self.home = os.path.abspath(home if home is not None else resolve_dsh_home())
        """``DSH_HOME`` as named (protected both there and where it leads)."""
        self.bwrap = bwrap
        # Resolved once, now, before any confined call could plant a program of that name.
        self.program: str | None = None
        self._program_error: str | None = None
        try:
            # The current folder is likely the workspace; "/" never is one (a root of "/" is refused).
            skip = {*self.writable_roots, os.path.realpath(os.getcwd())} - {"/"}
            self.program = find_program(bwrap, tuple(skip))
        except ValueError as exc:
            self._program_error = str(exc)
        self._ready = False
        self._lock = threading.Lock()
        self.world = self._world()

    def _world(self) -> World:
        if self.mode == "full":
            return World("local", label="the unconfined sandbox (mode full)")
        writable: Access = "write" if self.mode == "workspace-write" else "read"
        mounts = (Mount("/", "read"), Mount("/tmp", "none"), *(Mount(r, writable) for r in self.writable_roots))
        return World("sandbox", mounts, workspace=writable, hidden=self.hide, label=f"the {self.mode} sandbox")

    def _refuse(self, message: str) -> SandboxError:
        return SandboxError(message, mode=self.mode, bwrap=self.bwrap)

    def layout(self, request: BashExecRequest) -> Layout:
        """Where ``request`` runs and what it may write; raises :class:`SandboxError` when it must not run.

        A decision: a working directory outside every writable root runs there with nothing more
        writable (read-only, as the rest of the file system); one the sandbox does not show (under
        its private ``/tmp``, or hidden) is refused with one line. A writable root of ``/`` or one
        that holds the user's home (``$HOME``, ``$ZDOTDIR``) is refused: shells and agents read
        start-up files there that do not exist yet, and only bubblewrap's mount points on the host
        could keep them from being created.
        """
        workspace = os.path.realpath(request.workspace) if request.workspace is not None else None
        cwd = os.path.realpath(request.cwd or workspace or os.getcwd())
        roots: tuple[str, ...] = ()
        if self.mode == "workspace-write":
            roots = tuple(dict.fromkeys(((workspace,) if workspace is not None else ()) + self.writable_roots))
            # The harness's home and, for a served call, the client's (its environment is the ambient one).
            envs = (os.environ, request.ambient or {})
            homes = [os.path.realpath(h) for env in envs for h in (env.get("HOME"), env.get("ZDOTDIR")) if h]
            for root in roots:
                if not os.path.isdir(root):
                    raise self._refuse(f"the {self.mode} sandbox cannot make {root} writable: it is not a directory")
                held = [h for h in homes if h != "/" and _under(h, root)]
                if root == "/" or held:
                    raise self._refuse(
                        f"the {self.mode} sandbox will not make {root} writable: it holds "
                        f"{'the whole file system' if root == '/' else 'your home ' + held[0]}, whose start-up "
                        "files and agent settings a confined command could create; start the session in a "
                        "project folder (or list narrower writable_roots), or use the read-only mode"
                    )
        if self.world.access(cwd, workspace) == "none" and not any(_under(cwd, r) for r in roots):
            where = "inside a hidden folder" if any(_under(cwd, h) for h in self.hide) else "under its private /tmp"
            raise self._refuse(
                f"the {self.mode} sandbox cannot run a command in {cwd}: that folder is {where} and not visible "
                f"there; use a folder in the workspace{f' {workspace}' if workspace else ''} or outside /tmp"
            )
        if self.program is not None and (inside := [r for r in roots if _under(self.program, r)]):
            raise self._refuse(
                f"the sandbox program {self.program} lies in the writable root {inside[0]}, where a confined "
                "command could replace it; install bubblewrap outside it, or name one outside it in the "
                "bash-sandbox config's bwrap (for example /usr/bin/bwrap)"
            )
        try:
            search = _search_path([os.environ, request.ambient or os.environ], roots) if roots else ()
        except ValueError as exc:
            raise self._refuse(
                f"the {self.mode} sandbox will not run: PATH holds the relative entry {exc}, through which "
                "dsh would run on the host a program a confined command wrote in the workspace; remove it from PATH"
            ) from None
        except OSError as exc:
            raise self._changed(exc) from None
        return Layout(cwd, workspace, roots, search)

    def _changed(self, exc: OSError) -> SandboxError:
        """The refusal when a path on the way changed under a check (a background command renaming it)."""
        return self._refuse(
            f"the {self.mode} sandbox cannot run: {exc.filename} changed while its protection was worked "
            f"out ({exc.strerror}); run the call again, and stop background commands that rename it"
        )

    def _hide_options(self) -> list[str]:
        args: list[str] = []
        for entry, path in zip(self.hide_entries, self.hide, strict=True):
            given = os.path.abspath(os.path.expanduser(entry))
            if os.path.lexists(given) and path != given:
                raise self._refuse(
                    f"the bash-sandbox config's hide entry {entry} is reached through a symbolic link (it is "
                    f"{path}); name the folder itself"
                )
            if not os.path.isdir(path):
                what = "does not exist" if not os.path.lexists(path) else "is not a folder"
                raise self._refuse(
                    f"the bash-sandbox config's hide entry {entry} {what}; hide takes existing folders: "
                    f"create it (`mkdir -m 700 {given}`) or remove the entry"
                )
            args += ["--tmpfs", path, "--remount-ro", path]
        return args

    def _socket_masks(self) -> list[str]:
        """With ``allow_unix_sockets`` (the filter off): every other listening socket the sandbox shows, masked."""
        args: list[str] = []
        try:
            with open("/proc/net/unix", encoding="utf-8", errors="replace") as table:
                lines = table.read().splitlines()[1:]
        except OSError as exc:
            raise self._refuse(
                f"the {self.mode} sandbox cannot list the listening Unix sockets to mask ({exc})"
            ) from None
        seen: set[str] = set()
        for line in lines:
            fields = line.split(None, 7)
            if len(fields) < 8 or fields[7].startswith("@") or not int(fields[3], 16) & _LISTENING:
                continue
            path = fields[7]
            if path in seen or os.path.realpath(path) in self.allow_unix_sockets or not os.path.exists(path):
                continue
            seen.add(path)
            if self.world.access(path) != "none":
                args += ["--ro-bind", "/dev/null", path]
        return args

    def _namespaces(self) -> list[str]:
        args = ["--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
        if self.network:
            args.append("--share-net")
        return args

    def options(self, layout: Layout, seccomp_fd: int | None = None) -> tuple[str, ...]:
        """The ``bwrap`` options for a call laid out as ``layout`` (the filter read from ``seccomp_fd``).

        The order is the world's: the root read-only, the sandbox's own ``/dev``, ``/proc`` and
        ``/tmp``, the workspace (read-only in ``read-only``, so visible even under ``/tmp``) and the
        writable roots over them, then what stays read-only inside those roots, then ``hide`` last.
        """
        args = [*self._namespaces(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        if self.mode == "read-only":  # visible, even under /tmp, and nothing more
            for folder in dict.fromkeys(((layout.workspace,) if layout.workspace else ()) + self.writable_roots):
                if os.path.isdir(folder):
                    args += ["--ro-bind", folder, folder]
        for root in sorted(layout.roots, key=len):
            args += ["--bind", root, root]
        if layout.roots:
            try:
                wanted = protected_in(
                    layout.roots,
                    self.home,
                    trusted_paths(),
                    (*self.protect, *(f"{p}/" for p in layout.search), *_own_code(layout.roots)),
                )
                args += protect_options(layout.roots, wanted)
            except ProtectError as exc:
                raise self._refuse(f"the {self.mode} sandbox cannot run: {exc}") from None
            except OSError as exc:  # a path on the way changed under the check (a background command's doing)
                raise self._changed(exc) from None
        if self.allow_unix_sockets:
            args += self._socket_masks()
        args += self._hide_options()
        args += ["--remount-ro", "/dev"]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += ["--chdir", layout.cwd]
        return tuple(args)

    def spec(self, request: BashExecRequest) -> BashExecSpec:
        """The local executor's spec with its argv run by ``bwrap`` (``full``: unchanged)."""
        spec = super().spec(request)
        if self.mode == "full":
            return spec
        layout = self.layout(request)  # first: a program in a writable root is refused before it runs
        self.check()
        assert self.program is not None  # check() passed
        program = None if self.allow_unix_sockets else unix_socket_filter()
        fd = None if program is None else filter_fd(program)
        try:
            argv = (self.program, *self.options(layout, fd), "--", *spec.argv)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        return spec._replace(argv=argv, cwd=layout.cwd, pass_fds=() if fd is None else (fd,))

    def check(self) -> None:
        """Fail closed: raise :class:`SandboxError` unless bubblewrap runs a sandbox of this mode here.

        Checked once per executor until it succeeds (a failure is checked again at the next call,
        so installing bubblewrap or libseccomp needs no restart; the program itself is the one
        resolved when the executor was made).
        """
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            if self.program is None:
                raise self._refuse(
                    f"the {self.mode} sandbox cannot run: {self._program_error}; install it (Debian: apt-get "
                    "install bubblewrap) or set the bash-sandbox config's bwrap to its absolute path"
                )
            try:
                program = None if self.allow_unix_sockets else unix_socket_filter()
            except FilterError as exc:
                raise self._refuse(f"the {self.mode} sandbox cannot run: {exc}") from None
            fd = None if program is None else filter_fd(program)
            probe = [*self._namespaces(), "--ro-bind", "/", "/"]
            if fd is not None:
                probe += ["--seccomp", str(fd)]
            try:
                done = subprocess.run(
                    (self.program, *probe, "--", "true"),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=PROBE_TIMEOUT,
                    env={"PATH": os.environ.get("PATH", os.defpath)},
                    pass_fds=() if fd is None else (fd,),
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = str(exc)
            else:
                if done.returncode == 0:
                    self._ready = True
                    return
                lines = done.stderr.decode(errors="replace").strip().splitlines()
                reason = lines[-1] if lines else f"exit status {done.returncode}"
            finally:
                if fd is not None:
                    os.close(fd)
            raise self._refuse(
                f"the {self.mode} sandbox cannot run: bubblewrap cannot create its namespaces here ({reason}); "
                "allow user namespaces (sysctl user.max_user_namespaces > 0, and on Debian/Ubuntu "
                "kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0), "
                "or use bash-local where running unconfined is intended",
            )

    async def run(self, request: BashExecRequest) -> ExecResult:
        """:meth:`LocalExecutor.run` in the sandbox; the result carries ``sandbox``."""
        return self._mark(await super().run(request), request)

    def run_sync(self, request: BashExecRequest) -> ExecResult:
        """:meth:`LocalExecutor.run_sync` in the sandbox; the result carries ``sandbox``."""
        return self._mark(super().run_sync(request), request)

    def _mark(self, result: ExecResult, request: BashExecRequest) -> ExecResult:
        # Only ever reached after the command ran under self.program (spec() raises otherwise).
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
            roots = ", ".join(
                dict.fromkeys([*([request.workspace] if request.workspace else []), *self.writable_roots])
            )
            room = (
                f"only the workspace and writable roots ({roots or 'none'}), a private /tmp and /dev/null are "
                "writable, less dsh's home, .git, agent settings and start-up files in them"
            )
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
    """Directories replaced by an empty read-only one inside the sandbox (``~/.ssh``, say)."""
    bwrap: str = "bwrap"
    """The bubblewrap program: a name looked up once in PATH (outside the writable roots) or a path;
    either way it must pass the trust rule (yours or root's, not writable by group or others)."""
    writable_roots: tuple[str, ...] = ()
    """Folders writable in ``workspace-write`` besides the session's workspace."""
    protect: tuple[str, ...] = ()
    """More paths kept read-only inside writable roots: absolute, or relative to each root; a trailing
    ``/`` makes a missing one a folder placeholder."""
    allow_unix_sockets: tuple[str, ...] = ()
    """Unix socket paths a confined command may connect to; listing any replaces the seccomp filter
    by masking every other listening socket (see the README's limits)."""


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
        writable_roots: tuple[str, ...] = (),
        protect: tuple[str, ...] = (),
        allow_unix_sockets: tuple[str, ...] = (),
    ) -> "SandboxConfig":
        check_output_limits(max_output, max_spill, spill_budget)
        return super().__new__(
            cls,
            credential_pattern,
            max_output,
            spill_dir,
            max_spill,
            spill_budget,
            mode,
            network,
            tuple(hide),
            bwrap,
            tuple(writable_roots),
            tuple(protect),
            tuple(allow_unix_sockets),
        )


def _apply(ctx: Context, config: SandboxConfig) -> None:
    executor = SandboxExecutor(
        config.mode,
        network=config.network,
        hide=tuple(config.hide),
        bwrap=config.bwrap,
        writable_roots=tuple(config.writable_roots),
        protect=tuple(config.protect),
        allow_unix_sockets=tuple(config.allow_unix_sockets),
        home=ctx.get(DSH_HOME),
        **executor_options(ctx, config),
    )
    ctx.provide(SHELL_EXECUTOR, executor)


plugin = Plugin(name="bash-sandbox", apply=_apply, Config=SandboxConfig)
"""Provides a configured :class:`SandboxExecutor` as ``shell_executor``."""
