"""Processes in awkward states for executor tests: a dsh stopped past a deadline, the members of a group."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path

STALLED_TIMEOUT = 2.0
"""The timeout to give the command of :func:`stalled_command` (seconds); :func:`stall` outlasts it."""

_BIG_PIPE_WRITER = """
import fcntl, os, sys, time
fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 1 << 20)
open(sys.argv[1], "w").close()
time.sleep(0.3)
os.write(1, b"x" * 500000)
"""


def stalled_command(marker: Path) -> str:
    """A command that creates ``marker``, then, 0.3 s later, writes 500,000 ``x`` into its stdout
    (a pipe it grew to 1 MiB, so all of it is still there when it exits), ``done`` to stderr, and
    exits 3: all well before :data:`STALLED_TIMEOUT`, while :func:`stall` keeps dsh stopped."""
    return f"{sys.executable} -c {shlex.quote(_BIG_PIPE_WRITER)} {marker}; echo done >&2; exit 3"


def stall(pid: int, marker: Path) -> None:
    """Stop ``pid`` (SIGSTOP) once ``marker`` exists, keep it stopped past :data:`STALLED_TIMEOUT`, continue it."""
    deadline = time.monotonic() + 60
    while not marker.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"the stalled command never started: {marker} is still missing after 60 s")
        time.sleep(0.01)
    os.kill(pid, signal.SIGSTOP)
    time.sleep(STALLED_TIMEOUT + 0.2)
    os.kill(pid, signal.SIGCONT)


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``, read from ``/proc``."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry))
    return members


def wait_for_group_size(pgid: int, size: int, timeout: float = 10) -> list[int]:
    """Wait until group ``pgid`` has ``size`` live members, at most ``timeout`` seconds; its members then.

    A short-lived member (the ``mv`` that published a marker file) may still be exiting when a test
    first looks.
    """
    deadline = time.monotonic() + timeout
    while len(members := group_members(pgid)) != size and time.monotonic() < deadline:
        time.sleep(0.02)
    return members


def wait_for_group_end(pgid: int, timeout: float = 10) -> list[int]:
    """Wait until group ``pgid`` has no live member, at most ``timeout`` seconds; the members left."""
    return wait_for_group_size(pgid, 0, timeout)
