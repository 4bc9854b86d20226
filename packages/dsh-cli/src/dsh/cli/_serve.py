"""``dsh serve``: one loaded deployment answering ``dsh exec`` clients over a Unix socket.

A served ``dsh exec`` behaves as an in-process one: the command gets the client's environment as
its ambient environment (minus ``DSH_*`` and credential-shaped names, as always), the client's
working directory, and a session of its own; the deployment is re-read for new distributions at
every turn, and booted again before a request when its file, a hook file or the trust of either
moved since (:class:`dsh.harness.LiveRuntime`), so the server enforces what a cold ``dsh exec`` would. What it saves
is the start-up: interpreter, imports, models, distribution scan.

Guarantees (see the package README): the socket lives in a private ``run/`` directory and is 0600;
only clients of the server's own uid (``SO_PEERCRED``) in its own PID and mount namespaces are
served (a sandboxed command shares the uid: :func:`foreign_namespace`); messages are framed and bounded
(:mod:`._wire`); a connection that sends nothing, or stops half-way through a request, is closed
after the idle timeout; a request it takes is acknowledged by a keep-alive at once, and another
follows every ``--keepalive`` seconds until the answer, so a client can tell a long command from
a server that stopped answering; a request without an environment is an error, never the
server's own; a client's forwarded signal (SIGINT, SIGTERM, SIGQUIT, ...: ``INTERRUPTS``) kills
its command's process group and records the turn as interrupted by that signal (what it printed
is answered and recorded); on SIGTERM, SIGINT or any other of those signals to the server it stops accepting,
kills the commands in flight (their process groups), lets their turns flush (interrupted by its
signal), answers their clients, removes its socket and exits.
"""

import asyncio
import contextlib
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any, NamedTuple

from dsh.cli_fast._status import FAILURE_EXIT
from dsh.cli_fast._wire import (
    HEADER_SIZE,
    KEEPALIVE,
    WireError,
    decode,
    encode,
    frame_length,
    peer_pid,
    peer_uid,
    socket_path,
)
from dsh.core import DshError, EscapedError, describe
from dsh.harness import LiveRuntime, warnings
from dsh.paths import ensure_private_dir, seal_process, signals

from ._errors import ServeError, not_found_hint
from ._exec import exec_command
from ._output import json_text
from ._serve_protocol import (
    CLIENT_GONE,
    NotServed,
    Request,
    failure_answer,
    interrupted_answer,
    request_from,
    watch_client,
)

DEFAULT_IDLE_TIMEOUT = 10.0
"""Seconds a connection may take to deliver a whole request (or to take its answer)."""

STOP_SIGNALS = signals.interrupt_signals()
"""Signals that stop the server as SIGTERM does (every one that would otherwise end it: ``INTERRUPTS``)."""


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
            raise ServeError(f"a dsh server already listens on {path}", path=str(path))
        finally:
            probe.close()


def _depth(pid: int | str) -> int:
    """How many PID namespaces deep ``pid`` is, counted from this ``/proc``'s (its ``NSpid`` entries)."""
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return len(line.split()) - 1
    raise OSError(f"/proc/{pid}/status has no NSpid line")


class Namespaces(NamedTuple):
    """The PID namespace depth and mount namespace identity of one process (see :func:`foreign_namespace`)."""

    depth: int
    mount: tuple[int, int]
    """``st_dev`` and ``st_ino`` of its ``/proc/PID/ns/mnt``."""


def own_namespaces() -> Namespaces:
    """This process's namespaces, read once by a server: a process changes neither without asking
    (``setns``, ``unshare``), and ``dsh serve`` never does. Raises ``OSError`` where ``/proc`` cannot tell."""
    mount = os.stat("/proc/self/ns/mnt")
    return Namespaces(_depth("self"), (mount.st_dev, mount.st_ino))


def foreign_namespace(pid: int | None, ours: Namespaces | None = None) -> str | None:
    """Why the client process ``pid`` (from ``SO_PEERCRED``) is not served, or None when it shares our namespaces.

    A sandboxed command runs as the user, so its uid passes; its PID and mount namespaces are its
    sandbox's. Served, it would run a command outside the sandbox. The kernel names a client in our
    PID namespace or one below it (a sandbox's) by its pid here, any other by 0; one below has more
    ``NSpid`` entries than we have (``/proc/PID/status``, readable without privileges). The mount
    namespace is compared where ``/proc/PID/ns/mnt`` can be read: it cannot only for a client with
    privileges the server lacks (the kernel's ptrace rule), which gains nothing by being served.
    Fail closed: a client whose status cannot be read is refused. None for ``pid`` None (no
    ``SO_PEERCRED`` on this OS). ``ours``: this process's namespaces as :func:`own_namespaces` read
    them (read here when None).
    """
    if pid is None:
        return None
    if pid <= 0:
        return "from another PID namespace (the kernel cannot name its process here)"
    try:
        theirs = _depth(pid)
        depth = _depth("self") if ours is None else ours.depth
    except OSError as exc:
        return f"(pid {pid}) whose PID namespace cannot be read ({exc.strerror or exc})"
    if theirs != depth:
        return f"(pid {pid}) from another PID namespace: a sandboxed command is never served"
    try:
        peer = os.stat(f"/proc/{pid}/ns/mnt")
        if ours is None:
            mine = os.stat("/proc/self/ns/mnt")
            mount = (mine.st_dev, mine.st_ino)
        else:
            mount = ours.mount
    except PermissionError:
        return None
    except OSError as exc:
        return f"(pid {pid}) whose mount namespace cannot be read ({exc.strerror or exc})"
    if (peer.st_dev, peer.st_ino) != mount:
        return f"(pid {pid}) from another mount namespace: a sandboxed command is never served"
    return None


class Server:
    """The connections of one ``dsh serve`` and the commands they run."""

    def __init__(
        self,
        live: LiveRuntime,
        path: Path,
        idle_timeout: float,
        deployment: str | None = None,
        keepalive: float = KEEPALIVE,
    ) -> None:
        self.live = live
        self.path = path
        self.deployment = deployment
        self.idle_timeout = idle_timeout
        self.keepalive = keepalive
        self.stopping: str | None = None
        self.connections: set[asyncio.Task[None]] = set()
        self.reading: set[asyncio.Task[None]] = set()
        self.work: set[asyncio.Task[dict[str, Any]]] = set()
        try:
            self.namespaces: Namespaces | None = own_namespaces()
        except OSError:
            self.namespaces = None  # read again at each client, which is refused if they still cannot be

    async def _send(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        try:
            frame = encode(message)
        except WireError as exc:
            frame = encode({"ok": False, "error": f"the answer could not be sent: {exc}"})
        writer.write(frame)
        await asyncio.wait_for(writer.drain(), self.idle_timeout)

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, error: str) -> None:
        """Answer a client that is not served, then read what it sent, unparsed, until it closes.

        Its request is still unread: closing over it would reset the connection, and the client
        would lose the refusal it was about to read. The wait is bounded by the keep-alive period.
        """
        await self._send(writer, {"ok": False, "error": error})
        if writer.can_write_eof():
            writer.write_eof()
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(self.keepalive):
                while await reader.read(1 << 16):
                    pass

    async def _keep_alive(self, writer: asyncio.StreamWriter, request: Request) -> None:
        """Say "still here" at once (the request is taken) and every ``keepalive`` seconds, until cancelled.

        The first one also tells the client what it reads of its own line only through this server
        (``--json``: how it reports; ``--timeout``: how long it waits). Not drained: a client that
        stops reading lets a few bytes a minute pile up in the transport, which the connection's
        end frees; the answer itself is drained (``_send``).
        """
        writer.write(encode({"keepalive": self.keepalive, "json": request.json, "timeout": request.timeout}))
        await asyncio.sleep(self.keepalive)
        beat = encode({"keepalive": self.keepalive})
        while not writer.is_closing():
            writer.write(beat)
            await asyncio.sleep(self.keepalive)

    async def _read(self, reader: asyncio.StreamReader) -> dict[str, Any]:
        try:
            header = await asyncio.wait_for(reader.readexactly(HEADER_SIZE), self.idle_timeout)
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
            try:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
            finally:
                # Only now: a stop waits for this connection's close too, rather than letting the
                # loop's shutdown cancel it there (a CancelledError traceback in the server's log).
                self.connections.discard(task)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        uid = peer_uid(writer.get_extra_info("socket"))
        if uid is not None and uid != os.geteuid():
            _log(f"refused a client of uid {uid}: only uid {os.geteuid()} is served")
            await self._refuse(reader, writer, f"this dsh server serves only uid {os.geteuid()}")
            return
        foreign = foreign_namespace(peer_pid(writer.get_extra_info("socket")), self.namespaces)
        if foreign is not None:
            _log(f"refused a client {foreign}")
            await self._refuse(reader, writer, f"this dsh server refuses a client {foreign}")
            return
        task = asyncio.current_task()
        assert task is not None
        self.reading.add(task)
        try:
            request = request_from(await self._read(reader), self.deployment)
        except WireError as exc:
            await self._send(writer, {"ok": False, "error": str(exc)})
            return
        except NotServed as exc:  # the client runs the line itself
            await self._send(writer, {"ok": False, "unserved": str(exc)})
            return
        finally:
            self.reading.discard(task)
        if self.stopping:
            await self._send(writer, {"ok": False, "error": "this dsh server is stopping", "exit_code": 1})
            return
        # First, so the first keep-alive is written before the command's work takes the loop: the
        # work may not yield before its command runs (a JSONL session is opened on the loop).
        beats = asyncio.ensure_future(self._keep_alive(writer, request))  # until the answer is ready, flush included
        work = asyncio.ensure_future(self._run(request))
        self.work.add(work)
        work.add_done_callback(self.work.discard)
        watch = asyncio.ensure_future(watch_client(reader, writer.get_extra_info("socket"), self.idle_timeout))
        try:
            answer = await self._outcome(request, work, watch)
        finally:
            beats.cancel()
        if answer is not None:
            await self._send(writer, answer)

    async def _outcome(
        self, request: Request, work: asyncio.Task[dict[str, Any]], watch: asyncio.Task[tuple[str, str]]
    ) -> dict[str, Any] | None:
        """The answer to a request once its command ended (or was stopped); None when nobody is left to answer."""
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not watch.done():
                watch.cancel()
        if not work.done():
            kind, detail = watch.result()
            work.cancel(detail if kind == "interrupt" else CLIENT_GONE if kind == "gone" else "a malformed message")
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            if kind == "gone":
                return None
            if kind == "malformed":
                why = f"{detail}; the command's process group was killed and the turn recorded as interrupted"
                return failure_answer(request, why)
        if work.cancelled():
            interrupt = watch.result() if watch.done() and not watch.cancelled() else None
            return interrupted_answer(interrupt[1]) if interrupt and interrupt[0] == "interrupt" else self._stopped()
        if (error := work.exception()) is not None:
            if isinstance(error, DshError):
                detail = f"{error}{not_found_hint(error)}"
            else:
                detail = f"the exec failed: {describe(error)}"
            return failure_answer(request, detail)
        return work.result()

    def _stopped(self) -> dict[str, Any]:
        """The answer of an exec stopped by this server's own stop (or cancelled for no known reason)."""
        code = 128 + signal.Signals[self.stopping].value if self.stopping else FAILURE_EXIT
        return {
            "ok": False,
            "exit_code": code,
            "error": f"dsh serve received {self.stopping} while the command ran; its process group was "
            "killed and the turn recorded as it stood",
        }

    async def _run(self, request: Request) -> dict[str, Any]:
        def booting() -> None:
            _log("the deployment file, a hook file or their trust changed: booting the deployment again")

        try:
            with self.live.use(on_boot=booting) as runtime:
                outcome = await exec_command(
                    runtime,
                    request.command,
                    session_id=request.session,
                    cwd=request.cwd,
                    timeout=request.timeout,
                    ambient=request.env,  # the client's environment: its command starts from it
                )
                notes = warnings(runtime)
        except DshError as exc:
            if self.live.runtime is None:  # the files as they are now do not boot: nothing is served
                _log(f"the deployment did not boot again: {exc}")
            raise
        except (Exception, asyncio.CancelledError):
            raise
        except BaseException as exc:
            # Plugin code (a tool, an executor, a backend) raised SystemExit or the like: that is this
            # exec's failure, not the server's. A real Ctrl-C reaches serve() as a signal, never here.
            raise EscapedError(exc) from exc
        ended = f"interrupted by {outcome.interrupted}" if outcome.interrupted else f"exited {outcome.exit_code}"
        _log(f"exec in session {outcome.session_id} {ended}")
        result = outcome.as_json()
        notices = list(outcome.notices)
        if outcome.interrupted and self.stopping:
            notices.append(f"dsh: dsh serve received {self.stopping} while the command ran, and stopped")
        answer = {"ok": True, "result": result, "warnings": notes, "notices": notices}
        if request.json:
            answer["document"] = json_text(result)
        return answer

    async def stop(self, name: str) -> None:
        """Stop accepting, kill what runs, answer its clients and wait for every connection to end."""
        self.stopping = name
        for work in list(self.work):
            work.cancel(name)  # the turn is recorded as interrupted by the server's signal
        for reading in list(self.reading):
            reading.cancel()  # nothing asked yet: nobody to answer
        if self.connections:
            await asyncio.wait(set(self.connections), timeout=self.idle_timeout + 5)


async def serve(
    live: LiveRuntime,
    deployment: str | None,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    keepalive: float = KEEPALIVE,
) -> int:
    """Listen until SIGTERM, SIGINT or another of ``STOP_SIGNALS`` (one the caller ignores stays ignored); then stop as
    :meth:`Server.stop` says and remove the socket.

    The process is sealed first (:func:`dsh.paths.seal_process`): a served command cannot open
    another client's connection through ``/proc/<server>/fd`` and forge that client's answer.
    """
    seal_process()
    path = Path(socket_path(deployment))
    _claim(path)
    _watch_children_with_pidfds()
    server = Server(live, path, idle_timeout, deployment, keepalive)
    listener = await asyncio.start_unix_server(server.handle, path=str(path))
    os.chmod(path, 0o600)
    inode = path.stat().st_ino
    stop = asyncio.Event()
    received: list[str] = []

    def on_signal(signum: int) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    undo = signals.on_loop(asyncio.get_running_loop(), STOP_SIGNALS, on_signal)
    _log(f"listening on {path}")
    try:
        await stop.wait()
        listener.close()  # stop accepting first
        _release(path, inode)
        await server.stop(received[0])
        _log(f"stopped on {received[0]}")
    finally:
        undo()
        listener.close()
        _release(path, inode)
    return 0


def _watch_children_with_pidfds() -> None:
    """On Python 3.11, learn of each command's exit through a pidfd on the loop, not a new thread.

    3.11's default child watcher starts a thread per child process, about a millisecond and a half
    of every served turn (measured); 3.12 and later already use pidfds wherever the kernel has them.
    """
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))  # the kernel may lack it (before Linux 5.3) or refuse it
    except OSError:
        return
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)


def _release(path: Path, inode: int) -> None:
    """Remove our socket, but never one a later server put at the same path."""
    with contextlib.suppress(FileNotFoundError):
        if path.lstat().st_ino == inode:
            path.unlink()
