"""Output far past the limits stays bounded in memory and on disk; a daemon holding the pipes stalls no exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, LocalExecutor

_PRODUCED = 200 * 1024 * 1024
_CAP = 1024 * 1024

_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from dsh.bash import BashExecRequest, LocalExecutor

    executor = LocalExecutor(max_output=1000, spill_dir=sys.argv[2], max_spill=int(sys.argv[3]))
    request = BashExecRequest(f"head -c {sys.argv[4]} /dev/zero | tr '\\\\0' x; echo; echo done >&2")

    async def background():
        task = await executor.start(request)
        code = await task.wait()
        stdout, stderr = task.read()
        assert task.read() == ("", ""), "a second read returned the output again"
        return code, stdout, stderr, task.stdout_spill

    if sys.argv[1] == "sync":
        result = executor.run_sync(request)
        code, stdout, stderr, spill = result.exit_code, result.stdout, result.stderr, result.stdout_spill
    elif sys.argv[1] == "async":
        result = asyncio.run(executor.run(request))
        code, stdout, stderr, spill = result.exit_code, result.stdout, result.stderr, result.stdout_spill
    else:
        code, stdout, stderr, spill = asyncio.run(background())
    with open("/proc/self/status") as fh:
        peak = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) * 1024
    print(json.dumps({"peak": peak, "stdout": stdout[:1000], "tail": stdout[-20:], "length": len(stdout),
                      "spill": spill, "stderr": stderr, "exit": code}))
    """
)


@pytest.mark.parametrize("how", ["sync", "async", "background"])
def test_output_far_past_the_caps_keeps_memory_and_the_spill_bounded(tmp_path: Path, how: str) -> None:
    out = tmp_path / "output"
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, how, str(out), str(_CAP), str(_PRODUCED)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["exit"] == 0 and got["stderr"] == "done\n"
    assert got["tail"] == "x" * 19 + "\n"
    # 200 MB went through; the process never held more than a small fraction of it.
    assert got["peak"] < 80 * 1024 * 1024, f"peak RSS {got['peak']} bytes for {_PRODUCED} bytes of output"
    assert got["spill"] is not None and os.path.getsize(got["spill"]) == _CAP
    # A background task's output is cut and spilled as the foreground's (before: all 200 MB in memory and returned).
    new = " new" if how == "background" else ""
    assert got["stdout"].startswith(
        f"[stdout truncated: showing the last 1000 of {_PRODUCED + 1}{new} characters; the first {_CAP} of "
        f"{_PRODUCED + 1} bytes in {got['spill']}; the remaining {_PRODUCED + 1 - _CAP} bytes were dropped "
        f"(the spill cap is {_CAP} bytes)]\n"
    )


def _run(how: str, request: BashExecRequest) -> tuple[int, str, bool, float]:
    executor = LocalExecutor()
    started = time.monotonic()
    if how == "sync":
        result = executor.run_sync(request)
    else:
        import asyncio

        result = asyncio.run(executor.run(request))
    return result.exit_code, result.stdout, result.timed_out, time.monotonic() - started


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("detach", ["setsid ", ""])
def test_a_process_left_holding_the_pipes_does_not_turn_an_exit_into_a_timeout(
    tmp_path: Path, how: str, detach: str
) -> None:
    marker = tmp_path / "daemon.pid"
    command = f"({detach}sleep 40 & echo $! > {marker}); echo started; exit 3"
    try:
        code, stdout, timed_out, took = _run(how, BashExecRequest(command, timeout=20))
    finally:
        for _ in range(100):
            if marker.exists() and marker.read_text().strip():
                os.kill(int(marker.read_text()), signal.SIGKILL)
                break
            time.sleep(0.02)
    assert (code, stdout, timed_out) == (3, "started\n", False)
    assert took < 10, "the call waited for the process holding the pipes"
