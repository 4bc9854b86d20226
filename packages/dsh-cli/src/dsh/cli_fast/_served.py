"""The served ``dsh exec``: a client of a listening ``dsh serve`` that imports almost nothing.

It does not read its command line: it sends the words as typed, with its working directory and
environment, to the server of the deployment its environment names, and the server reads them with
the one parser (``dsh.cli._parser``). A line the server does not run (help, a usage error,
``--debug``, another ``--deployment``) comes back unserved, and the caller runs it in this process,
where the same parser reads it. What the client needs of its own options (``--json``, ``--timeout``)
the server says in its first keep-alive. It uses only the standard library's cheapest modules and
dsh's own import-free ones (``_wire``, ``_status``, and ``dsh.floor``): no argparse, pathlib,
hashlib, re, json, enum or typing.
"""

from __future__ import annotations

import os
import select
import stat
import sys
import time

from dsh.floor import UntrustedPathError, check_trusted, relative_home

from ._status import (
    FAILURE_EXIT,
    INTERRUPTS,
    UNKNOWN_EXIT,
    exec_notices,
    exec_status,
    failure_document,
    interrupted_early,
    interrupted_late,
    interrupted_reason,
)
from ._streams import write_all, write_outputs
from ._wire import (
    KEEPALIVE_RANGE,
    MISSED_KEEPALIVES,
    PROTOCOL,
    WireError,
    connect,
    dumps,
    frame,
    peer_pid,
    peer_uid,
    recv_frame,
    socket_path,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    import signal as signals
    from _socket import socket as Socket
    from collections.abc import Sequence
    from typing import Any
else:
    try:
        import _signal as signals  # the C module under `signal`, which adds enum: see `_wire.sockets`
    except ImportError:  # pragma: no cover - an interpreter without it
        import signal as signals

CONNECT_TIMEOUT = 10.0
"""Seconds to connect and hand the request over, to get the server's first keep-alive (it sends one as
soon as it has read the request), and to read a frame once it started coming."""

DEADLINE_GRACE = 120.0
"""Seconds past the ``--timeout`` it asked for that a client waits for the answer: the server's hooks
and its record of the turn. Without ``--timeout`` the deployment's timeout applies, which the client
does not know: only the server's keep-alives bound the wait then (``MISSED_KEEPALIVES``)."""

ANSWER_GRACE = 2.0
"""Seconds the client waits for the server's answer after forwarding an interrupt (a hung or
stopped server must not keep a Ctrl-C from ending ``dsh exec``)."""


def _warn(message: str) -> None:
    print(f"dsh: warning: {message}", file=sys.stderr)


def _connect(path: str) -> Socket | None:
    """A connection to our own user's server at ``path``; None (with a warning if suspicious) otherwise.

    Nothing is sent before the run directory, the socket's owner and the peer's uid are checked.
    """
    try:
        info = os.lstat(path)
    except OSError:
        return None  # no server (or no usable home): the in-process path says what is wrong
    run_dir = os.path.dirname(path)
    try:
        check_trusted(os.path.dirname(run_dir))
    except (UntrustedPathError, OSError):
        return None  # the in-process path refuses such a home with the one-line fix
    try:
        check_trusted(run_dir, "dsh serve's run directory")
    except UntrustedPathError as exc:
        _warn(f"{exc}; running in this process")
        return None
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.geteuid():
        _warn(f"ignoring {path}: not a socket owned by you (uid {os.geteuid()}); running in this process")
        return None
    try:
        sock = connect(path, CONNECT_TIMEOUT)
    except OSError:
        return None  # a socket left by a server that is gone: run in this process
    try:
        uid = peer_uid(sock)
    except OSError:
        sock.close()
        return None
    if uid is not None and uid != os.geteuid():
        sock.close()
        _warn(
            f"ignoring the dsh server at {path}: it runs as uid {uid}, not as you (uid {os.geteuid()}); "
            "running in this process"
        )
        return None
    return sock


class _Interrupted(Exception):
    """A signal came before the request was sent: nothing runs, nothing is asked."""


class _Forwarded(Exception):
    """A signal was forwarded while the client waited for the answer: wait a bounded grace from now on."""


class _Interrupts:
    """A signal of ``INTERRUPTS`` (SIGINT, SIGTERM, SIGQUIT, ...) while served: forwarded once to the
    server, which kills and records.

    Until the request is on its way a signal aborts the exec (nothing ran); while it is being sent
    the signal waits for the send to finish; after that it is sent at once as an interrupt frame.
    """

    def __init__(self) -> None:
        self.sock: Socket | None = None
        self.state = "connecting"
        self.caught: str | None = None
        self.forwarded_at: float | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _Interrupts:
        for name in INTERRUPTS:
            number = getattr(signals, name, None)
            if number is None or signals.getsignal(number) == signals.SIG_IGN:
                continue  # not on this platform, or ignored by the caller (`nohup`): not ours to take
            try:
                self.previous[number] = signals.signal(number, self._on_signal)
            except ValueError:  # not the main thread (an embedding caller): its signals stay its own
                break
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signals.signal(number, handler)

    def _on_signal(self, number: int, _frame: object) -> None:
        if self.caught is not None:
            return  # a second signal while the first is handled is ignored, as in-process
        self.caught = next(name for name in INTERRUPTS if getattr(signals, name, None) == number)
        if self.state == "connecting":
            raise _Interrupted
        if self.state in ("sent", "polling"):
            self.forward()
        if self.state == "polling":  # break the unbounded wait for the answer: it is bounded now
            raise _Forwarded

    def sent(self) -> None:
        """The request is out: forward a signal that came while it was sent."""
        self.state = "sent"
        if self.caught is not None:
            self.forward()

    def forward(self) -> None:
        self.forwarded_at = time.monotonic()
        if self.sock is None:
            return
        try:  # noqa: SIM105 - contextlib is a measurable import for the served client
            self.sock.sendall(frame(dumps({"interrupt": self.caught})))
        except OSError:
            pass  # the server is gone or answered already: the answer (or its absence) says so


class _Line:
    """The client's command line: its words as typed, and what the server said of them."""

    __slots__ = ("json", "timeout", "words")

    def __init__(self, words: Sequence[str]) -> None:
        self.words = list(words)
        self.json: bool | None = None
        """``--json``, as the server's first keep-alive says; None until it did."""
        self.timeout: float | None = None
        """``--timeout`` in seconds (None: the deployment's), as the server's first keep-alive says."""

    def heard(self, first: dict[str, Any]) -> bool:
        """Take ``--json`` and ``--timeout`` from the server's first keep-alive; False when they are not valid."""
        wants, timeout = first.get("json"), first.get("timeout")
        if not isinstance(wants, bool):
            return False
        if timeout is not None and (not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0):
            return False
        self.json, self.timeout = wants, None if timeout is None else float(timeout)
        return True

    def wants_json(self) -> bool:
        """Whether the line asks for ``--json``: the server's word, else the one parser's (a failure before the server
        said it: no served exec pays for the parser otherwise)."""
        if self.json is None:
            from dsh.cli._parser import parse  # a usage error exits 2 here, as in-process: the line was never run

            self.json = bool(getattr(parse(self.words), "json", False))
        return self.json


def _fail(line: _Line, message: str, status: int = FAILURE_EXIT) -> int:
    """dsh's own failure of a served exec: one line, the ``--json`` document, ``status`` (125 unless told)."""
    print(f"dsh: {message}", file=sys.stderr)
    if line.wants_json():
        write_all(_document(message, status_known=status != UNKNOWN_EXIT), sys.stdout, json=True)
    return status


def _document(error: str, *, status_known: bool = True) -> str:
    """The ``--json`` failure document when the server sent none (compact: this client has no json module)."""
    return dumps(failure_document(error, status_known=status_known)).decode("utf-8") + "\n"


def served_exec(words: Sequence[str], deployment: str | None) -> int | None:
    """Run the ``dsh exec`` line ``words`` through the ``dsh serve`` of ``deployment`` (a path, None for the
    built-in one); None when no server takes it (none listens, or it answered that the line is not its own)."""
    if relative_home() is not None:
        return None  # the in-process path refuses it in one sentence
    path = socket_path(deployment)
    line = _Line(words)
    try:
        cwd = os.getcwd()
    except OSError:  # a deleted working directory: the in-process path says so, with its status
        return None
    request = {"protocol": PROTOCOL, "argv": line.words, "cwd": cwd, "env": dict(os.environ)}
    try:
        message = frame(dumps(request))
    except WireError as exc:
        _warn(f"not using dsh serve: {exc}; running in this process")
        return None
    interrupts = _Interrupts()
    try:
        with interrupts:
            sock = _connect(path)
            if sock is None:
                return None
            try:
                answer = _exchange(line, sock, message, interrupts, path, _Runs(deployment, cwd))
            finally:
                interrupts.state = "answered"  # a signal from now on is only noted (see _report)
                sock.close()
            if isinstance(answer, _NotRun) or (isinstance(answer, dict) and "unserved" in answer):
                if interrupts.caught is not None:  # nothing ran, and the signal asks for nothing to run
                    raise _Interrupted
                return None
            if isinstance(answer, dict):
                return _report(line, answer, interrupts)
    except _Interrupted:
        assert interrupts.caught is not None
        print(f"dsh: {interrupted_early(interrupts.caught)}", file=sys.stderr)
        return _status_of(interrupts.caught)
    if isinstance(answer, int):
        return answer
    return _fail(line, f"the dsh server at {path} closed the connection before answering")


class _Runs:
    """Whether the server of ``deployment`` would run a line of a client in ``cwd`` at all (its own rule)."""

    def __init__(self, deployment: str | None, cwd: str) -> None:
        self.deployment, self.cwd = deployment, cwd

    def __call__(self, line: _Line) -> bool:
        from dsh.cli._parser import served_reading  # only once a server failed to acknowledge the line

        return not isinstance(served_reading(line.words, self.deployment, os.environ, self.cwd), str)


class _NotRun:
    """What :func:`_exchange` returns when the server never acknowledged a line it would not have run."""


_NOT_RUN = _NotRun()


def _exchange(
    line: _Line, sock: Socket, message: bytes, interrupts: _Interrupts, path: str, runs: _Runs
) -> dict[str, Any] | int | _NotRun | None:
    """Send the request and wait for the answer (forwarding a signal meanwhile); an int is a failure's status.

    A server that never acknowledges (stopped, hung) is given up on after :data:`CONNECT_TIMEOUT`; then a
    line that server would not have run (help, a usage error, ``--debug``, another deployment) started
    nowhere, and :data:`_NOT_RUN` says the caller runs it in this process, as it would have. So does a
    refusal that comes before any keep-alive (the request was not taken: an older server's protocol
    mismatch, a server that is stopping) of such a line: its refusal is about serving, which that line
    never asked for."""
    interrupts.sock = sock
    interrupts.state = "sending"
    delivered = True
    try:
        sock.sendall(message)
    except BrokenPipeError:
        delivered = False  # the server refused the request and closed: its answer says why
    except OSError as exc:
        return _fail(line, f"cannot send to the dsh server at {path}: {exc.strerror or exc}")
    interrupts.sent()
    server = f"the dsh server at {path}"
    pid = peer_pid(sock)
    if pid is not None:
        server += f" (pid {pid})"
    deadline = None  # once the server said the line's --timeout
    sock.settimeout(CONNECT_TIMEOUT)  # a frame that started coming is read whole, or the server stalled
    keepalive: float | None = None  # the server's period, from its first keep-alive
    heard = time.monotonic()
    while True:
        bound = CONNECT_TIMEOUT if keepalive is None else MISSED_KEEPALIVES * keepalive
        if not _frame_coming(sock, interrupts, heard + bound):
            if interrupts.caught is not None:
                print(
                    f"dsh: interrupted by {interrupts.caught}, but {server} did not answer within "
                    f"{ANSWER_GRACE:g} s: the command may still be running under it (stop that server)",
                    file=sys.stderr,
                )
                return _status_of(interrupts.caught)
            if deadline is not None and time.monotonic() > deadline:
                return _lost(line, f"{server} {_OVERDUE}")
            if keepalive is None and not runs(line):
                _warn(f"{server} {_silent(bound, keepalive, pid)}; it does not run this line: running it here")
                return _NOT_RUN
            return _lost(line, f"{server} {_silent(bound, keepalive, pid)}")
        try:
            answer = recv_frame(sock)
        except (OSError, WireError) as exc:
            return _lost(line, f"{server} sent no valid answer ({exc})")
        if answer is None and delivered:
            return _lost(line, f"{server} closed the connection without answering (it was killed or crashed)")
        if answer is None or "keepalive" not in answer:
            if answer is not None and _refused(answer) and keepalive is None and not runs(line):
                _warn(
                    f"{server} refused the request ({answer.get('error')}); it does not run this line: running it here"
                )
                return _NOT_RUN
            return answer
        period = answer["keepalive"]
        low, high = KEEPALIVE_RANGE
        if not isinstance(period, int | float) or isinstance(period, bool) or not low <= period <= high:
            return _lost(line, f"{server} sent no valid answer (a keep-alive of {period!r} seconds)")
        if keepalive is None:  # the first: the request is taken, and what the line asks of this client
            if not line.heard(answer):
                return _lost(line, f"{server} sent no valid answer (a first keep-alive without --json and --timeout)")
            if line.timeout is not None:
                deadline = time.monotonic() + line.timeout + DEADLINE_GRACE
        keepalive, heard = float(period), time.monotonic()
        if deadline is not None and heard > deadline:  # alive, but the command should have ended long ago
            return _lost(line, f"{server} {_OVERDUE}")


def _refused(answer: dict[str, Any]) -> bool:
    """Whether ``answer`` is a server's refusal of the request itself (not an exec's failure, not "unserved")."""
    return answer.get("ok") is False and "unserved" not in answer and "result" not in answer


_OVERDUE = f"did not answer within the command's timeout and {DEADLINE_GRACE:g} s more"


def _silent(bound: float, keepalive: float | None, pid: int | None) -> str:
    """Why a server silent for ``bound`` seconds was given up on (after "the dsh server at PATH"), and what to do."""
    said = f"sent no keep-alive for {bound:g} s" if keepalive else f"did not acknowledge the request within {bound:g} s"
    if pid is not None and _stopped(pid):
        return f"is stopped (resume it with kill -CONT {pid}) and {said}"
    if keepalive is None:
        return f"{said}, and may be hung"
    return f"{said}, though one is due every {keepalive:g} s while a command runs, and may be hung"


def _lost(line: _Line, why: str) -> int:
    """The request was delivered but no answer will come: the command may have started, and may run on."""
    return _fail(
        line,
        f"{why}: the command may have started and may still be running under it, and its turn may not "
        "be recorded; how it ended is unknown",
        UNKNOWN_EXIT,
    )


def _frame_coming(sock: Socket, interrupts: _Interrupts, silent_after: float) -> bool:
    """Wait until a frame starts to come (True), or give up (False) at ``silent_after`` (monotonic time),
    or :data:`ANSWER_GRACE` after a forwarded signal, whichever is first."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        try:  # _Forwarded comes at most once (a second signal is ignored), wherever it lands in here
            now = time.monotonic()
            until = silent_after
            if interrupts.forwarded_at is not None:
                until = min(until, interrupts.forwarded_at + ANSWER_GRACE)
            if until <= now:
                return bool(poller.poll(0))
            interrupts.state = "polling"
            ready = bool(poller.poll(int((until - now) * 1000) + 1))
            interrupts.state = "sent"
            if ready:
                return True
        except _Forwarded:
            interrupts.state = "sent"


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (by a signal or a tracer), as ``/proc/PID/stat`` says; False where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read().rpartition(b")")[2].split()
    except OSError:
        return False
    return bool(fields) and fields[0] in (b"T", b"t")


def _status_of(name: str) -> int:
    return 128 + int(getattr(signals, name))


def _report(line: _Line, answer: dict[str, Any], interrupts: _Interrupts) -> int:
    """Print a server's answer as the in-process ``dsh exec`` prints its outcome; return the exit status."""
    for warning in answer.get("warnings", []):
        _warn(str(warning))
    for notice in answer.get("notices", []):
        print(notice, file=sys.stderr)
    document = answer.get("document")
    if not answer.get("ok"):
        error = str(answer.get("error"))
        print(f"dsh: {error}", file=sys.stderr)
        if "interrupted" not in answer and line.wants_json():  # interrupted: stdout stays empty, as in-process
            write_all(document if isinstance(document, str) else _document(error), sys.stdout, json=True)
        # dsh exec keeps 0-124 and 126+ for the command: its own failures are 125, served or not.
        code = answer.get("exit_code", FAILURE_EXIT)
        return code if isinstance(code, int) else FAILURE_EXIT
    result = answer["result"]
    if line.json and isinstance(document, str):
        write_all(document, sys.stdout, json=True)
        lost = None
    else:
        lost = write_outputs(result["stdout"], result["stderr"])
    for notice in exec_notices(result):
        print(notice, file=sys.stderr)
    if lost is not None:  # the command's stderr and notices are out: now stdout's failure
        raise lost
    interrupted = result.get("interrupted")
    if isinstance(interrupted, str):  # its output is shown above, and recorded: as in-process
        print(f"dsh: {interrupted_reason(interrupted)}", file=sys.stderr)
        return exec_status(result)
    if interrupts.caught is not None:  # the command ended before the interrupt reached the server
        print(f"dsh: {interrupted_late(interrupts.caught)}", file=sys.stderr)
    return exec_status(result)
