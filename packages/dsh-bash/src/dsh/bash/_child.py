"""What the two ways of waiting share: how a child ended, and killing its whole process group."""

import contextlib
import errno
import os
import signal
from typing import TYPE_CHECKING, NamedTuple

from . import _supervisor
from ._errors import ExecError

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator

    from ._request import BashExecSpec

TIMEOUT_EXIT = 124
"""Exit status of a command its timeout killed (as GNU ``timeout``)."""
DRAIN_GRACE = 2.0
"""Seconds to keep reading a killed group's output; a process that escaped the group may hold the pipes."""
EXIT_GRACE = 0.5
"""Seconds to keep reading after the shell itself exited: a daemon it started may hold the pipes for ever."""
POLL = 0.1
"""While the pipes are open, how often to check whether the shell itself has exited."""


_PIPE_CAPACITY = 1 << 20
"""What a pipe can hold where its size cannot be asked: Linux's default ``pipe-max-size``."""


def pipe_capacity(fd: int) -> int:
    """Bytes the pipe ``fd`` can hold (``F_GETPIPE_SZ`` on Linux): all a finished writer can have left in it."""
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except (AttributeError, OSError):
        return _PIPE_CAPACITY


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group led by ``pid``; a group already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class _Unknown(int):
    """The type of :data:`UNKNOWN_STATUS` only, so that it is told apart from a command's own 255 by identity."""


UNKNOWN_STATUS = _Unknown(255)
"""The returncode :func:`reap` records when another reaper took the shell's status: reported as 255, never 0."""
UNKNOWN_NOTE = (
    "dsh: the exit status of this command is unknown: another waitpid() in this process reaped the shell "
    "first (a SIGCHLD handler or child watcher that reaps every child, or SIGCHLD set to SIG_IGN); dsh "
    "reports 255. Fix: reap only the pids you started, and leave SIGCHLD at SIG_DFL"
)
"""The line appended to the command's stderr when its status is :data:`UNKNOWN_STATUS`."""


def reap(proc: "subprocess.Popen[bytes]", pidfd: int | None = None, *, block: bool = False) -> bool:
    """Collect the shell's status into ``proc.returncode`` (through ``pidfd`` when given); whether it has one.

    Never ``Popen.poll``/``wait``: they turn ECHILD (another ``waitpid()`` in this process took the
    status, or SIGCHLD is ignored) into 0, which would pass a blocking hook's ``exit 2`` as success.
    Here that is :data:`UNKNOWN_STATUS`. Once set, ``returncode`` keeps ``Popen`` from reaping again.
    Without ``block``, False while the shell runs.
    """
    if proc.returncode is not None:
        return True
    flags = 0 if block else os.WNOHANG
    code: int
    try:
        if pidfd is not None:
            info = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | flags)
            if info is None:
                return False
            code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        else:
            pid, status = os.waitpid(proc.pid, flags)
            if pid == 0:
                return False
            code = os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        code = UNKNOWN_STATUS
    proc.returncode = code
    _supervisor.release(proc.pid)
    return True


def shell_status(returncode: int) -> int:
    """A child's status as a shell reports it: its own, or ``128+N`` for signal N (``subprocess`` says ``-N``)."""
    return returncode if returncode >= 0 else 128 - returncode


class Ended(NamedTuple):
    """How a child ended; its output is in the :class:`~._capture.Capture` objects it was read into."""

    returncode: int | None
    """As ``subprocess`` reports it (negative for a signal); None when it could not be reaped;
    :data:`UNKNOWN_STATUS` when another reaper took it, or the status could not be learned at all."""
    timed_out: bool
    why: str | None = None
    """With :data:`UNKNOWN_STATUS`: the line saying why the status is unknown, when not another
    reaper (an executor that lost its connection to the host, say); None for :data:`UNKNOWN_NOTE`."""

    @property
    def exit_code(self) -> int:
        """The status as a shell reports it: 124 on timeout, ``128+N`` for signal N, 255 when it is unknown."""
        if self.timed_out:
            return TIMEOUT_EXIT
        if self.returncode is None:
            return 128 + signal.SIGKILL
        return shell_status(self.returncode)

    @property
    def known(self) -> bool:
        """Whether the status is the command's own (or dsh's timeout), not one another reaper took."""
        return self.returncode is not UNKNOWN_STATUS or self.timed_out

    @property
    def note(self) -> str | None:
        """A line for the command's stderr when its exit status is not its own, else None."""
        return None if self.known else self.why or UNKNOWN_NOTE


def spawn(spec: "BashExecSpec") -> "subprocess.Popen[bytes]":
    """Start ``spec`` in its own process group (so the whole group can be killed), its output on new pipes."""
    try:
        proc = _popen(spec)
    finally:
        close_passed(spec)
    supervised(proc.pid, lambda: reap(proc, block=True))
    return proc


def close_passed(spec: "BashExecSpec") -> None:
    """Close the descriptors ``spec`` hands its child (see ``BashExecSpec.pass_fds``): the child has its own."""
    for fd in spec.pass_fds:
        with contextlib.suppress(OSError):
            os.close(fd)


@contextlib.contextmanager
def starting(spec: "BashExecSpec") -> "Iterator[None]":
    """Around the start of ``spec``'s shell, either way it is waited for: its folder checked and the supervisor
    up first, and a missing shell or an over-long command turned into one :class:`ExecError` naming it."""
    if spec.cwd is not None and not os.path.isdir(spec.cwd):
        raise ExecError(f"working directory {spec.cwd} does not exist", path=spec.cwd)
    _supervisor.ensure()
    try:
        yield
    except FileNotFoundError:
        raise ExecError(f"shell '{spec.argv[0]}' was not found on PATH", shell=spec.argv[0]) from None
    except OSError as exc:
        if exc.errno == errno.E2BIG:
            raise too_big(spec) from None
        raise


def _popen(spec: "BashExecSpec") -> "subprocess.Popen[bytes]":
    import subprocess

    with starting(spec):
        return subprocess.Popen(
            spec.argv,
            stdin=subprocess.PIPE if spec.stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(spec.env),
            cwd=spec.cwd,
            start_new_session=True,
            pass_fds=spec.pass_fds,
        )


def supervised(pgid: int, reap_shell: "Callable[[], object]") -> None:
    """Register the group of a shell just started with the supervisor; if that fails, kill and reap it, and raise."""
    try:
        _supervisor.supervise(pgid)
    except OSError as exc:
        kill_group(pgid)
        reap_shell()
        raise ExecError(
            f"the supervisor ({_supervisor.SUPERVISOR_SHELL}) that kills a command's process group when dsh dies "
            f"could not be reached: {exc.strerror or exc}; the command was killed",
            shell=_supervisor.SUPERVISOR_SHELL,
        ) from None


MAX_ARG_STRLEN = 32 * 4096
"""Linux's limit on one argument or one ``NAME=value`` of the environment (bytes, with its NUL)."""


def too_big(spec: "BashExecSpec") -> ExecError:
    """The error for a command the kernel refused with ``E2BIG``, naming the limit it passed.

    A decision: the command is not handed over some other way (a script file, a descriptor), which
    would change ``$0``, ``BASH_SOURCE`` and its error messages; the fix is the caller's, one line.
    """
    command = spec.argv[-1]
    size = len(os.fsencode(command)) + 1
    if size > MAX_ARG_STRLEN:
        return ExecError(
            f"the command is {size} bytes, over the kernel's limit of {MAX_ARG_STRLEN} bytes for one "
            "argument (MAX_ARG_STRLEN); split it into smaller commands (a long here-document appended in parts) "
            "or run it from a file",
            shell=spec.argv[0],
        )
    for key, value in spec.env.items():
        if len(os.fsencode(key)) + len(os.fsencode(value)) + 2 > MAX_ARG_STRLEN:
            return ExecError(
                f"environment variable {key} is over the kernel's limit of {MAX_ARG_STRLEN} bytes for one "
                "variable (MAX_ARG_STRLEN); unset or shorten it",
                shell=spec.argv[0],
            )
    total = sum(len(os.fsencode(a)) + 1 for a in spec.argv)
    total += sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in spec.env.items())
    return ExecError(
        f"the command and its environment are {total} bytes, over the system's limit of "
        f"{os.sysconf('SC_ARG_MAX')} bytes for them together (ARG_MAX); shorten the command (run a file instead) "
        "or the environment",
        shell=spec.argv[0],
    )
