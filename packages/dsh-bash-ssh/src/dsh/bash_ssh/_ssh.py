"""The bash executor on a remote host over SSH (asyncssh): the local executor's contract, another machine.

dsh-bash's own code builds the request's argv and environment (channels checked, terminal settings,
the snapshot last), bounds and spills the output and shapes the result; this module only carries
them over SSH (:mod:`._remote` says what is sent) and keeps a pool of connections.
"""

import asyncio
import contextlib
import functools
import math
import os
import secrets
import signal
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import asyncssh

from dsh.bash import (
    SHELL_EXECUTOR,
    UNKNOWN_STATUS,
    BashExecRequest,
    Capture,
    Ended,
    ExecError,
    ExecResult,
    Interrupts,
    LocalExecutor,
    LocalExecutorConfig,
    Mount,
    World,
    check_output_limits,
    executor_options,
)
from dsh.core import Context, FieldError, Plugin
from dsh.paths import trust_fault

from ._remote import NO_CWD, remote_line

_LOCAL = LocalExecutorConfig()
"""The local executor's defaults (``SshConfig`` repeats its fields; the executor scrubs the same names)."""

DEFAULT_PORT: Final = 22
MAX_SESSIONS: Final = 10
"""Commands one connection carries at once: OpenSSH's default ``MaxSessions``; more open another connection."""
EXIT_GRACE: Final = 0.5
"""Seconds to keep reading once the remote command exited (the local executor's rule)."""
DRAIN_GRACE: Final = 2.0
"""Seconds to keep reading after killing the remote group, and the longest wait for the kill itself."""
POLL: Final = 0.1
KEEPALIVE_INTERVAL: Final = 15.0
"""Seconds of silence from the host before a keep-alive is sent (OpenSSH's ``ServerAliveInterval``)."""
KEEPALIVE_COUNT_MAX: Final = 3
"""Keep-alives left unanswered before the connection is given up (OpenSSH's ``ServerAliveCountMax``)."""


class SshError(ExecError):
    """The host cannot be reached, refused us, its key is not the one known, or the identity file
    cannot be used: nothing ran.

    A connection lost once the command may have started is no error: the call's result has an
    unknown status (255, ``status_known`` false) and keeps the output received until then.
    """

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message)
        self.host = host
        """``host:port`` at fault."""


class _MayHaveStarted(Exception):
    """The connection was lost after the exec request may have reached the host: never retried."""


class _Pooled:
    """One connection and how many commands it carries now."""

    __slots__ = ("conn", "sessions")

    def __init__(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn
        self.sessions = 0


class SshExecutor:
    """Runs each command on ``host`` over SSH, in its own process group there.

    Connections are pooled (at most ``max_sessions`` commands each) and reopened after a drop. The
    host's key must be in ``known_hosts``: an unknown or changed key is refused, never accepted.
    """

    def __init__(
        self,
        host: str,
        *,
        port: int = DEFAULT_PORT,
        user: str | None = None,
        identity_file: str | os.PathLike[str] | None = None,
        known_hosts: str | os.PathLike[str] = "~/.ssh/known_hosts",
        dsh_home: str | None = None,
        shared: Sequence[str] = (),
        connect_timeout: float = 10.0,
        max_sessions: int = MAX_SESSIONS,
        keepalive_interval: float = KEEPALIVE_INTERVAL,
        keepalive_count_max: int = KEEPALIVE_COUNT_MAX,
        credential_pattern: str | None = _LOCAL.credential_pattern,
        **local: Any,
    ) -> None:
        self.host = host
        self.port = port
        self.user = user
        self.identity_file = None if identity_file is None else Path(os.path.expanduser(identity_file))
        self.known_hosts = Path(os.path.expanduser(known_hosts))
        self.connect_timeout = connect_timeout
        self.max_sessions = max_sessions
        self.keepalive_interval = keepalive_interval
        self.keepalive_count_max = keepalive_count_max
        self.credential_pattern = credential_pattern
        # The recipe (argv, environment, output bounds, the result) is dsh-bash's: the remote
        # ambient is scrubbed on the host, so the local one contributes nothing here.
        self._local = LocalExecutor(ambient={}, credential_pattern=None, **local)
        self.world = World(
            "remote", tuple(Mount(p, "read") for p in shared), home=dsh_home, label=f"host {self.address}"
        )
        self._pool: list[_Pooled] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: asyncio.Lock | None = None

    @property
    def address(self) -> str:
        """``user@host:port`` as messages name it."""
        return f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"

    @property
    def silence_bound(self) -> float:
        """Seconds a connection may stay silent before it is given up as lost (its keep-alives unanswered)."""
        return self.keepalive_interval * (self.keepalive_count_max + 1)

    @property
    def connections(self) -> int:
        """Open connections in the pool now."""
        return sum(not p.conn.is_closed() for p in self._pool)

    async def run(self, request: BashExecRequest) -> ExecResult:
        """Run on the host to completion, timeout or cancellation; the last two kill its process group there.

        Statuses, timeouts (124, output kept), output bounds and spills are the local executor's.
        A host that cannot be reached, whose key is unknown or changed, or an unusable identity file
        raises :class:`SshError` before anything ran. A connection lost (or silent past the
        keep-alives) once the command may have started is its result: status unknown (255), the
        output received until then kept, and a line on stderr saying so.
        """
        spec = self._local.spec(request)
        marker = f"DSH-{secrets.token_hex(12)}"
        line = remote_line(marker, spec.argv, spec.env, spec.cwd, self.credential_pattern)
        out, err = self._local.captures()
        started = time.monotonic()
        try:
            try:
                pooled, proc = await self._open(line)
            except _MayHaveStarted as exc:
                return self._local.result(self._lost(str(exc), "as the command was being started"), out, err, started)
            try:
                ended = await self._wait(pooled, proc, marker, spec.stdin, spec.timeout, spec.cwd, out, err)
            finally:
                pooled.sessions -= 1
                proc.close()
            return self._local.result(ended, out, err, started)
        except BaseException:
            out.discard()
            err.discard()
            raise

    async def start(self, request: BashExecRequest) -> Any:
        """Background tasks are not carried over SSH (yet): refused with the way out."""
        raise ExecError(
            f"background tasks cannot run on {self.address} over bash-ssh; run the command in the foreground"
        )

    async def close(self) -> None:
        """Close every pooled connection."""
        pool, self._pool = self._pool, []
        for pooled in pool:
            pooled.conn.close()
        for pooled in pool:
            with contextlib.suppress(Exception):
                await pooled.conn.wait_closed()

    # -- connections -----------------------------------------------------------------------------

    async def _open(self, line: str) -> tuple[_Pooled, asyncssh.SSHClientProcess[bytes]]:
        """A new channel running ``line``, on a pooled connection; one retry on a fresh one after a drop.

        Retried (and :class:`SshError`, nothing ran) only while the exec request cannot have reached
        the host: before the channel opened, or when the host refused the request over a connection
        that still stands. A connection lost after the request went out raises :class:`_MayHaveStarted`.
        """
        for attempt in (1, 2):
            pooled = await self._acquire()
            sent: list[asyncssh.SSHClientProcess[bytes]] = []
            try:
                await pooled.conn.create_session(functools.partial(_session, sent), line, encoding=None)
            except (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError) as exc:
                pooled.sessions -= 1
                lost = pooled.conn.is_closed()
                self._drop(pooled)
                if sent and lost:
                    raise _MayHaveStarted(_reason(exc)) from None
                if attempt == 2:
                    raise SshError(
                        f"cannot start the command on {self.address}: {_reason(exc)}", host=self.address
                    ) from None
                continue
            return pooled, sent[0]
        raise AssertionError("unreachable")

    async def _acquire(self) -> _Pooled:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # connections belong to the loop that opened them
            self._loop, self._pool, self._opening = loop, [], asyncio.Lock()
        assert self._opening is not None
        async with self._opening:
            self._pool = [p for p in self._pool if not p.conn.is_closed()]
            for pooled in self._pool:
                if pooled.sessions < self.max_sessions:
                    pooled.sessions += 1
                    return pooled
            pooled = _Pooled(await self._connect())
            pooled.sessions += 1
            self._pool.append(pooled)
            return pooled

    async def _connect(self) -> asyncssh.SSHClientConnection:
        if not self.known_hosts.is_file():
            raise SshError(
                f"cannot check the host key of {self.address}: known_hosts file {self.known_hosts} does not exist; "
                "add the host's key there after verifying it (ssh-keyscan prints it), or set known_hosts",
                host=self.address,
            )
        # asyncssh's defaults stand where the config says nothing (its () is "the usual", its None "none").
        given: dict[str, Any] = {}
        if self.user is not None:
            given["username"] = self.user
        if self.identity_file is not None:
            given["client_keys"] = self._identity()
        try:
            return await asyncssh.connect(
                self.host,
                self.port,
                known_hosts=str(self.known_hosts),
                agent_path=None,
                config=[],
                connect_timeout=self.connect_timeout,
                keepalive_interval=self.keepalive_interval,
                keepalive_count_max=self.keepalive_count_max,
                **given,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise SshError(
                f"refused {self.address}: its host key is not the one in {self.known_hosts} ({exc.reason}); "
                "if the host was re-keyed, verify the new key and replace its line there "
                f"(ssh-keygen -R '[{self.host}]:{self.port}' -f {self.known_hosts})",
                host=self.address,
            ) from None
        except asyncssh.PermissionDenied as exc:
            raise SshError(
                f"{self.address} refused the login ({exc.reason}); check user and identity_file in the bash-ssh config",
                host=self.address,
            ) from None
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            raise SshError(
                f"cannot reach ssh host {self.address}: {_reason(exc)}; check that sshd runs there and the "
                "bash-ssh config's host and port",
                host=self.address,
            ) from None

    def _identity(self) -> list[asyncssh.SSHKeyPair]:
        """The configured key (and its ``-cert.pub`` beside it, if any), loaded here so that a key that
        cannot be used fails in one line naming the file and the field, never as the host's fault."""
        path = self.identity_file
        assert path is not None

        def unusable(reason: str) -> SshError:
            return SshError(
                f"identity_file {path} of the bash-ssh config for {self.address} cannot be used: {reason}",
                host=self.address,
            )

        try:
            info = path.stat()
        except FileNotFoundError:
            raise unusable("it does not exist; set identity_file to your private key's path") from None
        except OSError as exc:
            raise unusable(f"{exc.strerror or exc}; set identity_file to a readable private key") from None
        if not stat.S_ISREG(info.st_mode):
            raise unusable("it is not a file; set identity_file to your private key's path")
        fault = trust_fault(info, secret=True)
        if fault == "owner":
            raise unusable(f"it is owned by uid {info.st_uid}, who could replace it; use a key file of your own")
        if fault == "mode":
            # OpenSSH refuses such a key too ("UNPROTECTED PRIVATE KEY FILE"): others may have read it.
            raise unusable(
                f"its mode {stat.S_IMODE(info.st_mode):04o} lets others read or change it; "
                f"make it private (chmod 600 {path})"
            )
        try:
            return list(asyncssh.load_keypairs(str(path)))
        except asyncssh.KeyImportError as exc:
            if "passphrase" in str(exc).lower():
                raise unusable(
                    "it is protected by a passphrase, which dsh cannot ask for (no ssh-agent is consulted); "
                    "use a key without one for this host"
                ) from None
            raise unusable(f"it is not a private key asyncssh can read ({_reason(exc)})") from None
        except OSError as exc:
            raise unusable(f"{exc.strerror or exc}; set identity_file to a readable private key") from None

    def _drop(self, pooled: _Pooled) -> None:
        if pooled in self._pool:
            self._pool.remove(pooled)
        pooled.conn.close()

    # -- one command -----------------------------------------------------------------------------

    async def _wait(
        self,
        pooled: _Pooled,
        proc: asyncssh.SSHClientProcess[bytes],
        marker: str,
        stdin: bytes | None,
        timeout: float | None,
        cwd: str | None,
        out: Capture,
        err: Capture,
    ) -> Ended:
        pid: list[int] = []
        nocwd: list[bool] = []
        lost: list[BaseException] = []
        killed = True
        with contextlib.suppress(asyncssh.ConnectionLost, asyncssh.DisconnectError, BrokenPipeError):
            if stdin:
                proc.stdin.write(stdin)
            proc.stdin.write_eof()
        pumps = [
            asyncio.ensure_future(_pump(proc.stdout, marker.encode(), out, None, None, lost)),
            asyncio.ensure_future(_pump(proc.stderr, marker.encode(), err, pid, nocwd, lost)),
        ]
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            finished = await _read(proc, pumps, deadline)
            if not finished:
                killed = await self._kill(pooled, pid)
                await asyncio.wait(pumps, timeout=DRAIN_GRACE)
            elif _status(proc) is None:  # the output ended: the exit status comes next, or the connection is gone
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait_closed(), left)
                if _status(proc) is None and not pooled.conn.is_closed() and left is not None:
                    finished = False
                    killed = await self._kill(pooled, pid)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._kill(pooled, pid))
            raise
        finally:
            for pump in pumps:
                pump.cancel()
            for pump in pumps:
                with contextlib.suppress(BaseException):
                    await pump
        for pump in pumps:
            if not pump.cancelled() and pump.exception() is not None:
                raise pump.exception()  # type: ignore[misc]
        if nocwd:
            raise ExecError(f"working directory {cwd} does not exist on {self.address}", path=cwd)
        if not finished:
            if killed:
                return Ended(None, timed_out=True)
            self._drop(pooled)
            return self._lost("the kill could not reach the host", "after the command timed out")
        code = _status(proc)
        if code is None:
            self._drop(pooled)
            why = _reason(lost[0]) if lost else "it closed before the command's exit status came"
            return self._lost(why, "while the command ran")
        return Ended(code, timed_out=False)

    def _lost(self, why: str, when: str) -> Ended:
        """How a command ended whose connection was lost ``when``: status unknown, with the line saying so."""
        if "keepalive" in why:  # asyncssh's "Server not responding to keepalive"
            why = (
                f"no answer to {self.keepalive_count_max} keep-alives: the host sent nothing for "
                f"{self.silence_bound:g} s (keepalive_interval, keepalive_count_max)"
            )
        return Ended(
            UNKNOWN_STATUS,
            timed_out=False,
            why=f"dsh: the connection to {self.address} was lost {when} ({why}); its exit status is unknown "
            "and it may still be running there, so dsh reports 255 with the output received until then "
            "(check the host; the next call reconnects)",
        )

    async def _kill(self, pooled: _Pooled, pid: list[int]) -> bool:
        """Kill the command's process group on the host (over the same connection), within ``DRAIN_GRACE``;
        whether the host took the kill (False: the connection is gone or silent, the group may run on)."""
        if not pid:
            return True  # no pid came in the whole timeout over a live connection: the line never got that far
        if pooled.conn.is_closed():
            return False
        try:
            await asyncio.wait_for(pooled.conn.run(f"kill -KILL -- -{pid[0]}", check=False), DRAIN_GRACE)
        except Exception:
            return False
        return True


def _session(sent: list[asyncssh.SSHClientProcess[bytes]]) -> asyncssh.SSHClientProcess[bytes]:
    """The session of a new channel, made by asyncssh once the channel is open, just before it sends
    the exec request: from here on the command may run on the host, whatever happens to the connection."""
    Interrupts.command_started()
    sent.append(asyncssh.SSHClientProcess())
    return sent[0]


async def _read(
    proc: asyncssh.SSHClientProcess[bytes], pumps: Sequence[asyncio.Future[None]], deadline: float | None
) -> bool:
    """Wait for both streams to end (True), the deadline (False), or ``EXIT_GRACE`` after the exit (True)."""
    exited_at: float | None = None
    while True:
        pending = [p for p in pumps if not p.done()]
        if not pending:
            return True
        now = time.monotonic()
        if exited_at is None and _status(proc) is not None:
            exited_at = now
        limit = deadline if exited_at is None else min(deadline or math.inf, exited_at + EXIT_GRACE)
        if limit is not None and now >= limit:
            return exited_at is not None
        await asyncio.wait(pending, timeout=POLL if limit is None else min(POLL, limit - now))


async def _pump(
    stream: asyncssh.SSHReader[bytes],
    marker: bytes,
    sink: Capture,
    pid: list[int] | None,
    nocwd: list[bool] | None,
    lost: list[BaseException],
) -> None:
    """Feed ``stream`` into ``sink``, dropping what came before the marker line (a login profile's noise);
    a lost connection ends the stream, its error kept in ``lost``."""
    head = b""
    found = False
    try:
        while chunk := await stream.read(65536):
            if not found:
                head += chunk
                at = head.find(marker)
                end = head.find(b"\n", at) if at >= 0 else -1
                if end < 0:
                    continue
                said = head[at + len(marker) : end].strip()
                if pid is not None and said.isdigit():
                    pid.append(int(said))
                elif nocwd is not None and said == NO_CWD.encode():
                    nocwd.append(True)
                found = True
                chunk, head = head[end + 1 :], b""
            if chunk:
                sink.feed(chunk)
    except (asyncssh.ConnectionLost, asyncssh.DisconnectError, BrokenPipeError) as exc:
        lost.append(exc)


def _status(proc: asyncssh.SSHClientProcess[bytes]) -> int | None:
    """The remote status as ``subprocess`` reports it (``-N`` for signal N), or None before it came."""
    if proc.exit_signal is not None:
        name = proc.exit_signal[0]
        try:
            return -signal.Signals[f"SIG{name}"]
        except KeyError:  # a signal this system does not name: killed, as far as a shell can tell
            return -signal.SIGKILL
    return proc.exit_status


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.rstrip(".")


class _SshConfig(NamedTuple):
    host: str
    credential_pattern: str | None = _LOCAL.credential_pattern
    """Regex of ambient variable names to scrub; null keeps every name."""
    max_output: int = _LOCAL.max_output
    spill_dir: str | None = None
    """Where truncated output is spilled; default ``<DSH_HOME>/output``."""
    max_spill: int | None = None
    """Bytes of one stream's output kept in its spill file (default 256 MiB); the rest is counted and dropped."""
    spill_budget: int | None = None
    """Bytes the spill folder may hold (default 256 MiB) before the oldest finished spills are removed."""
    port: int = DEFAULT_PORT
    user: str | None = None
    """The remote user; default: the local user's name."""
    identity_file: str | None = None
    """The private key; default: the usual ``~/.ssh/id_*`` keys."""
    known_hosts: str = "~/.ssh/known_hosts"
    """Where the host's key must be: an unknown or changed key is refused."""
    dsh_home: str | None = None
    """The ``DSH_HOME`` a remote command gets (a path on the host); default: none."""
    shared: tuple[str, ...] = ()
    """Harness paths mounted at the same path on the host (a shared sessions folder, say)."""
    connect_timeout: float = 10.0
    max_sessions: int = MAX_SESSIONS
    keepalive_interval: float = KEEPALIVE_INTERVAL
    """Seconds of silence from the host before a keep-alive is sent."""
    keepalive_count_max: int = KEEPALIVE_COUNT_MAX
    """Unanswered keep-alives before the connection is given up: a link silent for
    ``keepalive_interval * (keepalive_count_max + 1)`` seconds is lost (a running command's status unknown)."""


class SshConfig(_SshConfig):
    """Config of the ``bash-ssh`` plugin (``host``, ``port``, ``user``, ``identity_file`` and ``known_hosts``
    are a contract); a checked record (``_replace`` and ``_make`` skip the checks).

    After ``host`` (the one required field, so first) come :class:`~dsh.bash.LocalExecutorConfig`'s
    five fields, repeated (a NamedTuple inherits no fields; a test checks that they match) and checked
    as it checks them.
    """

    __slots__ = ()

    def __new__(
        cls,
        host: str,
        credential_pattern: str | None = _LOCAL.credential_pattern,
        max_output: int = _LOCAL.max_output,
        spill_dir: str | None = None,
        max_spill: int | None = None,
        spill_budget: int | None = None,
        port: int = DEFAULT_PORT,
        user: str | None = None,
        identity_file: str | None = None,
        known_hosts: str = "~/.ssh/known_hosts",
        dsh_home: str | None = None,
        shared: tuple[str, ...] = (),
        connect_timeout: float = 10.0,
        max_sessions: int = MAX_SESSIONS,
        keepalive_interval: float = KEEPALIVE_INTERVAL,
        keepalive_count_max: int = KEEPALIVE_COUNT_MAX,
    ) -> "SshConfig":
        if not host.strip():
            raise FieldError("host", "must name the host (a name or address)")
        check_output_limits(max_output, max_spill, spill_budget)
        if not 1 <= port <= 65535:
            raise FieldError("port", "must be a TCP port, 1 to 65535")
        if not 0 < connect_timeout < math.inf:
            raise FieldError("connect_timeout", "must be a positive, finite number of seconds")
        if max_sessions < 1:
            raise FieldError("max_sessions", "must be at least 1")
        if not 0 < keepalive_interval < math.inf:
            raise FieldError("keepalive_interval", "must be a positive, finite number of seconds")
        if keepalive_count_max < 1:
            raise FieldError("keepalive_count_max", "must be at least 1")
        return super().__new__(
            cls,
            host,
            credential_pattern,
            max_output,
            spill_dir,
            max_spill,
            spill_budget,
            port,
            user,
            identity_file,
            known_hosts,
            dsh_home,
            shared,
            connect_timeout,
            max_sessions,
            keepalive_interval,
            keepalive_count_max,
        )


def _apply(ctx: Context, config: SshConfig) -> None:
    executor = SshExecutor(
        config.host,
        port=config.port,
        user=config.user,
        identity_file=config.identity_file,
        known_hosts=config.known_hosts,
        dsh_home=config.dsh_home,
        shared=config.shared,
        connect_timeout=config.connect_timeout,
        max_sessions=config.max_sessions,
        keepalive_interval=config.keepalive_interval,
        keepalive_count_max=config.keepalive_count_max,
        **executor_options(ctx, config),
    )
    ctx.provide(SHELL_EXECUTOR, executor)


plugin = Plugin(name="bash-ssh", apply=_apply, Config=SshConfig)
"""Provides a configured :class:`SshExecutor` as ``shell_executor``."""
