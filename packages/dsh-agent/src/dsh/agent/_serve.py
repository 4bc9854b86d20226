"""``dsh serve``: one loaded deployment answering ``dsh exec`` clients over a Unix socket.

A served ``dsh exec`` behaves as an in-process one: the command gets the client's environment as
its ambient environment (minus ``DSH_*`` and credential-shaped names, as always), the client's
working directory, and a session of its own; the deployment is re-read for new distributions at
every turn. What it saves is the start-up: interpreter, imports, models, distribution scan.

Guarantees (see the package README): the socket lives in a private ``run/`` directory and is 0600;
only clients of the server's own uid are served (``SO_PEERCRED``); messages are framed and bounded
(:mod:`._wire`); a connection that sends nothing, or stops half-way through a request, is closed
after the idle timeout; a request without an environment is an error, never the server's own; on
SIGTERM, SIGINT or SIGHUP the server stops accepting, kills the commands in flight (their process
groups), lets their turns flush, answers their clients, removes its socket and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh.bash import AMBIENT_ENV
from dsh.core import DshError, EscapedError, describe
from dsh.loader import Runtime
from dsh.paths import ensure_private_dir

from ._args import socket_path
from ._exec import exec_command
from ._runtime import warnings
from ._wire import HEADER, PROTOCOL, WireError, decode, encode, frame_length, peer_uid

DEFAULT_IDLE_TIMEOUT = 10.0
"""Seconds a connection may take to deliver a whole request (or to take its answer)."""

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _log(message: str) -> None:
    print(f"dsh serve: {message}", file=sys.stderr, flush=True)


def _claim(path: Path) -> None:
    ensure_private_dir(path.parent, "dsh serve's run directory")
    if path.is_symlink() or path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # left behind by a server that is gone
        else:
            raise DshError(f"a dsh server already listens on {path}")
        finally:
            probe.close()


def _request_fields(request: Mapping[str, Any]) -> tuple[str, dict[str, str], str, str | None, float | None]:
    """Validate a request; raise :class:`WireError` naming the first field at fault."""
    if request.get("protocol") != PROTOCOL:
        raise WireError(f"this dsh server speaks protocol {PROTOCOL}, the client {request.get('protocol')!r}")
    command = request.get("command")
    if not isinstance(command, str) or not command.strip():
        raise WireError("malformed request: 'command' must be a non-blank string")
    env = request.get("env")
    if not isinstance(env, dict) or not env:
        # Never fall back to the server's own environment: it is not the caller's.
        raise WireError("malformed request: 'env' must be the client's non-empty environment")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise WireError("malformed request: 'env' must map strings to strings")
    cwd = request.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise WireError("malformed request: 'cwd' must be an absolute path")
    session = request.get("session")
    if session is not None and not isinstance(session, str):
        raise WireError("malformed request: 'session' must be a string or null")
    timeout = request.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0
    ):
        raise WireError("malformed request: 'timeout' must be a positive number of seconds or null")
    return command, env, cwd, session, None if timeout is None else float(timeout)


class Server:
    """The connections of one ``dsh serve`` and the commands they run."""

    def __init__(self, runtime: Runtime, path: Path, idle_timeout: float) -> None:
        self.runtime = runtime
        self.path = path
        self.idle_timeout = idle_timeout
        self.stopping: str | None = None
        self.connections: set[asyncio.Task[None]] = set()
        self.reading: set[asyncio.Task[None]] = set()
        self.work: set[asyncio.Task[dict[str, Any]]] = set()

    async def _send(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        try:
            frame = encode(message)
        except WireError as exc:
            frame = encode({"ok": False, "error": f"the answer could not be sent: {exc}"})
        writer.write(frame)
        await asyncio.wait_for(writer.drain(), self.idle_timeout)

    async def _read(self, reader: asyncio.StreamReader) -> dict[str, Any]:
        try:
            header = await asyncio.wait_for(reader.readexactly(HEADER.size), self.idle_timeout)
            body = await asyncio.wait_for(reader.readexactly(frame_length(header)), self.idle_timeout)
        except TimeoutError:
            raise WireError(f"no complete request within {self.idle_timeout:g} s; closing the connection") from None
        except asyncio.IncompleteReadError:
            raise WireError("the connection closed in the middle of a request") from None
        return decode(body)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection: check the peer, read one request, run it, answer."""
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the client went away or stopped reading: nobody is left to answer
        finally:
            self.connections.discard(task)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        uid = peer_uid(writer.get_extra_info("socket"))
        if uid is not None and uid != os.geteuid():
            _log(f"refused a client of uid {uid}: only uid {os.geteuid()} is served")
            await self._send(writer, {"ok": False, "error": f"this dsh server serves only uid {os.geteuid()}"})
            return
        task = asyncio.current_task()
        assert task is not None
        self.reading.add(task)
        try:
            command, env, cwd, session, timeout = _request_fields(await self._read(reader))
        except WireError as exc:
            await self._send(writer, {"ok": False, "error": str(exc)})
            return
        finally:
            self.reading.discard(task)
        if self.stopping:
            await self._send(writer, {"ok": False, "error": "this dsh server is stopping", "exit_code": 1})
            return
        token = AMBIENT_ENV.set(env)
        try:
            # The task copies this context, so the command sees the client's environment.
            work = asyncio.ensure_future(self._run(command, cwd, session, timeout))
        finally:
            AMBIENT_ENV.reset(token)
        self.work.add(work)
        work.add_done_callback(self.work.discard)
        hangup = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait({work, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hangup.cancel()
        if not work.done():
            work.cancel()  # the client went away: kill its command's process group
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            return
        if work.cancelled():
            code = 128 + signal.Signals[self.stopping].value if self.stopping else 1
            answer = {
                "ok": False,
                "exit_code": code,
                "error": f"dsh serve received {self.stopping} while the command ran; its process group was "
                "killed and the turn recorded as it stood",
            }
        elif (error := work.exception()) is not None:
            detail = str(error) if isinstance(error, DshError) else f"the exec failed: {describe(error)}"
            answer = {"ok": False, "error": detail}
        else:
            answer = work.result()
        await self._send(writer, answer)

    async def _run(self, command: str, cwd: str, session: str | None, timeout: float | None) -> dict[str, Any]:
        runtime = self.runtime
        try:
            outcome = await exec_command(runtime, command, session_id=session, cwd=cwd, timeout=timeout)
        except (Exception, asyncio.CancelledError):
            raise
        except BaseException as exc:
            # Plugin code (a tool, an executor, a backend) raised SystemExit or the like: that is this
            # exec's failure, not the server's. A real Ctrl-C reaches serve() as a signal, never here.
            raise EscapedError(exc) from exc
        _log(f"exec in session {outcome.session_id} exited {outcome.exit_code}")
        return {
            "ok": True,
            "result": outcome.as_json(),
            "warnings": warnings(runtime),
            "notices": list(outcome.notices),
        }

    async def stop(self, name: str) -> None:
        """Stop accepting, kill what runs, answer its clients and wait for every connection to end."""
        self.stopping = name
        for work in list(self.work):
            work.cancel()
        for reading in list(self.reading):
            reading.cancel()  # nothing asked yet: nobody to answer
        if self.connections:
            await asyncio.wait(set(self.connections), timeout=self.idle_timeout + 5)


async def serve(runtime: Runtime, deployment: str | None, *, idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> int:
    """Listen until SIGTERM, SIGINT or SIGHUP; then stop as :meth:`Server.stop` says and remove the socket."""
    path = socket_path(deployment)
    _claim(path)
    server = Server(runtime, path, idle_timeout)
    listener = await asyncio.start_unix_server(server.handle, path=str(path))
    os.chmod(path, 0o600)
    inode = path.stat().st_ino
    stop = asyncio.Event()
    received: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    _log(f"listening on {path}")
    try:
        await stop.wait()
        listener.close()  # stop accepting first
        _release(path, inode)
        await server.stop(received[0])
        _log(f"stopped on {received[0]}")
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
        listener.close()
        _release(path, inode)
    return 0


def _release(path: Path, inode: int) -> None:
    """Remove our socket, but never one a later server put at the same path."""
    with contextlib.suppress(FileNotFoundError):
        if path.lstat().st_ino == inode:
            path.unlink()
