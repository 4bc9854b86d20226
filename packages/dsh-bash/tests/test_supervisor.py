"""A command's process group dies with the dsh process that ran it, even by SIGKILL (the supervisor)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, LocalExecutor
from dsh.bash._supervisor import supervisor_pid
from dsh.testing import group_members, wait_for_group_end, wait_for_group_size

KILLED_RUN = """
import asyncio, sys
from dsh.bash import BashExecRequest, LocalExecutor

how, marker = sys.argv[1], sys.argv[2]
request = BashExecRequest(f"sleep 300 & sleep 300 & echo $$ > {marker}.tmp && mv {marker}.tmp {marker}; wait")

async def background():
    await LocalExecutor().start(request)
    await asyncio.sleep(300)

if how == "run_sync":
    LocalExecutor().run_sync(request)
elif how == "run":
    asyncio.run(LocalExecutor().run(request))
else:
    asyncio.run(background())
"""


def _started(proc: subprocess.Popen[bytes], marker: Path) -> int:
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the command never started"
        time.sleep(0.01)
    return int(marker.read_text())


@pytest.mark.parametrize("how", ["run_sync", "run", "start"])
def test_sigkill_of_the_dsh_process_kills_its_commands_whole_group(tmp_path: Path, how: str) -> None:
    # Before: the shell and its backgrounded sleep ran on as orphans for 300 s.
    marker = tmp_path / "pgid"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, how, str(marker)])
    pgid = _started(proc, marker)
    assert len(wait_for_group_size(pgid, 3)) == 3  # the shell and its two sleeps
    proc.kill()
    proc.wait()
    left = wait_for_group_end(pgid)
    for pid in left:  # never leave them behind, whatever the outcome
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"process group {pgid} outlived a SIGKILL of dsh"


def test_a_finished_commands_leftovers_and_other_groups_are_not_killed_when_dsh_ends(tmp_path: Path) -> None:
    # What a command left running on purpose (`server &`) is not dsh's to kill, even when dsh dies later.
    marker = tmp_path / "daemon"
    script = (
        "import sys, time\nfrom dsh.bash import BashExecRequest, LocalExecutor\n"
        f"LocalExecutor().run_sync(BashExecRequest('sleep 300 >/dev/null 2>&1 & echo $$ > {marker}'))\n"
        "print('ran', flush=True)\ntime.sleep(300)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ran\n"
        pgid = int(marker.read_text())
        proc.kill()
        proc.wait()
        time.sleep(0.3)
        assert len(group_members(pgid)) == 1, "the daemon a finished command left was killed"
    finally:
        for pid in group_members(int(marker.read_text())) if marker.exists() else []:
            os.kill(pid, signal.SIGKILL)


def test_a_killed_supervisor_is_replaced_and_told_of_every_live_group(tmp_path: Path) -> None:
    executor = LocalExecutor()
    executor.run_sync(BashExecRequest("true"))
    first = supervisor_pid()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    time.sleep(0.1)
    assert executor.run_sync(BashExecRequest("echo still runs")).stdout == "still runs\n"
    second = supervisor_pid()
    assert second is not None and second != first
    assert asyncio.run(executor.run(BashExecRequest("exit 4"))).exit_code == 4
    assert supervisor_pid() == second
