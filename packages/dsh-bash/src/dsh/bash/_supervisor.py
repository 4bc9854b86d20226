"""Each command's process group dies with the dsh process that started it, even by SIGKILL.

dsh kills a command's group on timeout, cancellation and the signals it catches, but SIGKILL
cannot be caught, and neither can a crash: the group would run on as an orphan. So each dsh
process has one **supervisor** (a decision): a ``/bin/sh`` it starts at its first command, in its
own session (no terminal's signals reach it), ignoring every signal it can, its stdin the read end
of a pipe whose write end only this process holds (close-on-exec, so no command inherits it).
dsh writes ``+PGID`` as a command's group starts and ``-PGID`` once it has reaped the command's
shell. When the pipe reaches end-of-file (this process ended, however), the supervisor sends
SIGKILL to every group still registered, and exits.

Why not ``PR_SET_PDEATHSIG`` alone: it signals only the direct child (the shell) when its parent
dies, never the shell's group, so ``sleep 300 &`` in a command would survive; and setting it
needs code between ``fork`` and ``exec`` (``preexec_fn``), which keeps ``subprocess`` from using
``vfork`` and is unsafe in a threaded server. One supervisor per process rather than one per
command: a served ``dsh exec`` costs no extra process, and a one-shot one a single ``/bin/sh``.

A group is unregistered when dsh reaps its shell, so what a finished command left running on
purpose (``server &``) is not killed later, as the executor's own rule says. If the supervisor
itself was killed, the next registration starts a new one and hands it every live group.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING

from ._errors import ExecError

SUPERVISOR_SHELL = "/bin/sh"

_SCRIPT = """\
trap '' HUP INT QUIT TERM USR1 USR2 ALRM PIPE TSTP TTIN TTOU
live=' '
while read -r line; do
  case $line in
    +*) live="$live${line#?} " ;;
    -*) pg=${line#?}; case $live in *" $pg "*) live="${live%%" $pg "*} ${live#*" $pg "}" ;; esac ;;
  esac
done
for pg in $live; do kill -s KILL -- "-$pg" 2>/dev/null; done
"""
"""The supervisor: a set of live group ids, read line by line; at end-of-file each group is killed."""

_lock = threading.Lock()
_live: set[int] = set()
_owner: int | None = None
"""The pid of the process whose supervisor this is (a forked child starts its own)."""
_writer: int | None = None
_proc: subprocess.Popen[bytes] | None = None

if TYPE_CHECKING:
    import subprocess


def _start() -> None:
    """Start this process's supervisor and hand it every live group (the lock is held)."""
    import subprocess

    global _owner, _writer, _proc
    _stop()
    read_end, write_end = os.pipe()  # both close-on-exec: no command ever holds the write end
    try:
        _proc = subprocess.Popen(
            [SUPERVISOR_SHELL, "-c", _SCRIPT],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={},
            start_new_session=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    _owner, _writer = os.getpid(), write_end
    if _live:
        os.write(write_end, "".join(f"+{pgid}\n" for pgid in sorted(_live)).encode())


def _stop() -> None:
    """Forget a supervisor that died or belongs to the parent of a fork (the lock is held)."""
    global _owner, _writer, _proc
    if _writer is not None and _owner == os.getpid():
        with contextlib.suppress(OSError):
            os.close(_writer)
    if _proc is not None and _owner == os.getpid():
        with contextlib.suppress(Exception):
            _proc.kill()
            _proc.wait(1)
    _owner = _writer = _proc = None


def _send(line: str) -> None:
    """Write one line to the supervisor, starting (or restarting) it as needed (the lock is held)."""
    if _writer is None or _owner != os.getpid():
        _start()
        if line.startswith("+"):
            return  # the new supervisor was handed every live group, this one included
    assert _writer is not None
    try:
        os.write(_writer, line.encode())
    except BrokenPipeError:  # someone killed the supervisor: a new one, told of every live group
        _start()


def ensure() -> None:
    """Make sure this process's supervisor runs, before a command starts: :class:`ExecError` if it cannot."""
    with _lock:
        if _writer is None or _owner != os.getpid():
            try:
                _start()
            except OSError as exc:
                raise ExecError(
                    f"cannot start {SUPERVISOR_SHELL}, the supervisor that kills a command's process group when "
                    f"dsh dies: {exc.strerror or exc}; nothing was run",
                    shell=SUPERVISOR_SHELL,
                ) from None


def supervise(pgid: int) -> None:
    """Tie the process group ``pgid`` to this process: it is killed when this process ends, until :func:`release`.

    Raises ``OSError`` when no supervisor could be (re)started; the caller kills the group.
    """
    with _lock:
        _live.add(pgid)
        try:
            _send(f"+{pgid}\n")
        except BaseException:
            _live.discard(pgid)
            raise


def release(pgid: int) -> None:
    """The group's shell has been reaped: the group is no longer killed when this process ends."""
    with _lock:
        if pgid in _live:
            _live.discard(pgid)
            if _writer is not None and _owner == os.getpid():
                with contextlib.suppress(BrokenPipeError):
                    os.write(_writer, f"-{pgid}\n".encode())


def supervisor_pid() -> int | None:
    """The pid of this process's supervisor, if it runs (for tests that count a process's children)."""
    with _lock:
        return _proc.pid if _proc is not None and _owner == os.getpid() else None
