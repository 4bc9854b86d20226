"""A throw-away PostgreSQL server for tests and benchmarks, started from the machine's installation.

    with TemporaryServer() as server:          # initdb + pg_ctl in a fresh temporary directory
        backend = PostgresPersistence(server.dsn, schema="t1")

The server listens on a loopback port (and a Unix socket in its directory), requires a password
(SCRAM), and is stopped and deleted on exit. PostgreSQL refuses to run as root, so when this process
is root the server runs as an unprivileged system user (``postgres`` if it exists, else ``nobody``)
through ``setpriv``. :class:`ServerUnavailable` says, naming PostgreSQL, why no server could start.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

__all__ = ["ServerUnavailable", "TemporaryServer", "find_binaries"]

_TOOLS = ("initdb", "pg_ctl")


class ServerUnavailable(RuntimeError):
    """No PostgreSQL server could be started here (the message says why)."""


def find_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``: ``PATH`` first, then Debian's versioned folders."""
    on_path = [shutil.which(t) for t in _TOOLS]
    if all(on_path):
        return Path(os.path.realpath(on_path[0] or "")).parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.name.split(".")],
    )
    for folder in reversed(versions):
        if all(os.access(os.path.join(folder, t), os.X_OK) for t in _TOOLS):
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class TemporaryServer:
    """A private PostgreSQL cluster in a temporary directory; a context manager."""

    user = "dsh"
    database = "postgres"

    def __init__(self, *, fsync: bool = True) -> None:
        self.fsync = fsync
        self.password = secrets.token_urlsafe(18)
        self.port = 0
        self.root: Path | None = None
        self.bin: Path | None = None
        self._run_as: list[str] = []

    @property
    def host(self) -> str:
        """The loopback address the server listens on."""
        return "127.0.0.1"

    @property
    def dsn(self) -> str:
        """A libpq connection string for the superuser, password included."""
        return f"host={self.host} port={self.port} user={self.user} dbname={self.database} password={self.password}"

    def dsn_without_password(self) -> str:
        """The same connection string without the password (for libpq's environment or a wrong one)."""
        return f"host={self.host} port={self.port} user={self.user} dbname={self.database}"

    def __enter__(self) -> TemporaryServer:
        self.setup()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

    def _account(self) -> tuple[list[str], int, int] | None:
        if os.geteuid() != 0:
            return [], os.getuid(), os.getgid()
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise ServerUnavailable("PostgreSQL cannot run as root and setpriv is missing to drop privileges")
        for name in ("postgres", "nobody"):
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            if entry.pw_uid == 0:
                continue
            drop = [setpriv, f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]
            return drop, entry.pw_uid, entry.pw_gid
        return None

    def _run(self, argv: list[str], what: str) -> None:
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        for key in [k for k in env if k.startswith("PG")]:
            del env[key]
        proc = subprocess.run(
            [*self._run_as, *argv], capture_output=True, text=True, env=env, cwd=self.root, timeout=120, check=False
        )
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise ServerUnavailable(f"PostgreSQL {what} failed: {' '.join(detail[-3:]) or proc.returncode}")

    def setup(self) -> None:
        """Create the cluster and start the server; raise :class:`ServerUnavailable`."""
        self.bin = find_binaries()
        if self.bin is None:
            raise ServerUnavailable(
                "PostgreSQL is not installed: no initdb and pg_ctl on PATH or under /usr/lib/postgresql/*/bin"
            )
        account = self._account()
        if account is None:
            raise ServerUnavailable("PostgreSQL cannot run as root and no unprivileged user (postgres, nobody) exists")
        self._run_as, uid, gid = account
        # Not under pytest's root-only temporary folder: the server's user must reach its directory.
        self.root = Path(tempfile.mkdtemp(prefix="dsh-pg-"))
        os.chown(self.root, uid, gid)
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        os.chown(pwfile, uid, gid)
        self._run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.root / "data"),
                "-U",
                self.user,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            "initdb",
        )
        pwfile.unlink()
        self.start()

    def start(self) -> None:
        """Start (or restart) the server, on the same port when it had one."""
        if self.bin is None or self.root is None:
            raise ServerUnavailable("PostgreSQL server was never set up (call setup() first)")
        for attempt in range(3):
            if not self.port or attempt:
                self.port = _free_port()
            options = (
                f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync={'on' if self.fsync else 'off'}"
                " -c max_connections=200 -c shared_buffers=32MB"
            )
            try:
                self._run(
                    [
                        str(self.bin / "pg_ctl"),
                        "-D",
                        str(self.root / "data"),
                        "-l",
                        str(self.root / "log"),
                        "-o",
                        options,
                        *("-w", "-t", "60", "start"),
                    ],
                    "server start",
                )
                return
            except ServerUnavailable:
                if attempt == 2:
                    raise

    def stop_argv(self, mode: str = "fast") -> list[str]:
        """The command line that stops the server (as its own user), for a test to run elsewhere."""
        if self.bin is None or self.root is None:
            raise ServerUnavailable("PostgreSQL server was never set up (call setup() first)")
        return [*self._run_as, str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", mode, "-w", "stop"]

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast`` disconnects clients; ``immediate`` is a crash)."""
        self._run(self.stop_argv(mode)[len(self._run_as) :], "server stop")

    def cleanup(self) -> None:
        """Stop the server if it runs and delete its directory."""
        if self.root is None:
            return
        if self.bin is not None and (self.root / "data" / "postmaster.pid").exists():
            with contextlib.suppress(ServerUnavailable):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None
