"""A real ``dsh serve`` process and a raw client of its framed protocol, for the security tests."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from dsh.cli_fast._wire import PROTOCOL, frame, recv_frame

DSH_FAILED = (1, 125)
"""Statuses of a dsh that failed itself: 1 today for every verb, 125 for `dsh exec` once #9's exit statuses land."""


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without DSH_* plus ``DSH_HOME`` and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSH_")}
    env["DSH_HOME"] = str(home)
    env.update(extra)
    return env


def as_a_user() -> list[str]:
    """A prefix running a server as a process of an ordinary user could be: as root, without
    CAP_SYS_PTRACE (root's other capabilities do not open another process's fds), else nothing.
    Its commands inherit the same set, so what they reach is what a same-user command reaches."""
    return ["setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"] if os.geteuid() == 0 else []


PARENT_PROBE = """#!/bin/bash
# What a command can reach of the dsh process that started it ($1): its fds, opened for appending.
for f in /proc/$1/fd/*; do
  if { : >> "$f"; } 2>/dev/null; then echo "opened $f"; fi
done
echo probed
"""
"""A script printing ``probed`` alone when no fd of the process it names could be opened."""


class ServeProcess:
    """``python -m dsh.cli serve`` under ``home``, stopped by the test (or its fixture)."""

    def __init__(
        self, home: Path, *args: str, env: dict[str, str] | None = None, prefix: list[str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "dsh.cli", "serve", *args],
            env=clean_env(home, **(env or {})),
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        self.startup: list[str] = []
        while True:
            line = self.proc.stderr.readline()
            assert line, f"dsh serve exited before listening: {''.join(self.startup)}"
            if line.startswith("dsh serve: listening on "):
                self.path = Path(line.removeprefix("dsh serve: listening on ").strip())
                break
            self.startup.append(line)
        # Keep reading the log, or a full pipe would stall the server after a few hundred execs.
        self._log: list[str] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._log.append(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Signal the server; return its exit status and the rest of its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=60)
        self._reader.join(timeout=60)
        return self.proc.returncode, "".join(self._log)


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(60)
    sock.connect(str(path))
    return sock


def request(
    command: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    *,
    options: tuple[str, ...] = (),
    deployment: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A well-formed request of ``dsh exec [--deployment D] OPTIONS -- COMMAND`` (``command``: one shell line)."""
    named = ("--deployment", deployment) if deployment is not None else ()
    return {
        "protocol": PROTOCOL,
        "argv": ["exec", *named, *options, "--", command],
        "cwd": str(cwd),
        "env": env if env is not None else {"PATH": os.environ["PATH"]},
        **fields,
    }


def answer_of(sock: socket.socket) -> dict[str, Any] | None:
    """The server's answer on ``sock``, past the keep-alives it sends while the command runs."""
    while True:
        message = recv_frame(sock)
        if message is None or "keepalive" not in message:
            return message


def ask(path: Path, message: dict[str, Any] | bytes) -> dict[str, Any] | None:
    """Send one frame (a message, or raw bytes as they are) and read the answer."""
    raw = message if isinstance(message, bytes) else frame(json.dumps(message).encode())
    with connect(path) as sock:
        with contextlib.suppress(BrokenPipeError):  # a refused request: the answer says why
            sock.sendall(raw)
        answer = answer_of(sock)
        # Wait for the server to close its end, so its descriptor count is settled when we return.
        while sock.recv(65536):
            pass
        return answer


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in process group ``pgid``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def session_lock_released_after_flush(tmp_path: Path) -> bool:
    """Whether the JSONL backend lets go of a session's lock once its turn is flushed (#9)."""
    from dsh.harness import open_runtime
    from dsh.session import SESSIONS

    home = tmp_path / "probe-home"
    runtime = open_runtime(env={"DSH_HOME": str(home), "HOME": os.environ.get("HOME", "/")})
    try:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        session.record("probe")
        session.flush()
        location = session.locate()
        assert location is not None
        fd = os.open(location.path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
        return True
    finally:
        runtime.close()
