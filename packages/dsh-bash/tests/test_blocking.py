"""The synchronous executor (``run_sync``) keeps ``run()``'s contract, and signals interrupt it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, ExecError, ExecResult, LocalExecutor
from dsh.testing import STALLED_TIMEOUT, group_members, stall, stalled_command


def _sync(request: BashExecRequest, **kwargs: object) -> ExecResult:
    return LocalExecutor(**kwargs).run_sync(request)  # type: ignore[arg-type]


def _async(request: BashExecRequest, **kwargs: object) -> ExecResult:
    return asyncio.run(LocalExecutor(**kwargs).run(request))  # type: ignore[arg-type]


BOTH = pytest.mark.parametrize("run", [_sync, _async], ids=["run_sync", "run"])


@BOTH
def test_status_output_stdin_and_cwd(run: Callable[..., ExecResult], tmp_path: Path) -> None:
    result = run(BashExecRequest("pwd; read l; echo got:$l; echo oops >&2; exit 3", cwd=str(tmp_path), stdin="hi\n"))
    assert (result.exit_code, result.stdout, result.stderr) == (3, f"{tmp_path}\ngot:hi\n", "oops\n")


@BOTH
@pytest.mark.parametrize(("command", "status"), [("kill -TERM $$", 143), ("kill -KILL $$", 137), ("exit 0", 0)])
def test_a_command_killed_by_signal_n_exits_128_plus_n(
    run: Callable[..., ExecResult], command: str, status: int
) -> None:
    result = run(BashExecRequest(f"echo out; {command}"))
    assert (result.exit_code, result.stdout, result.timed_out) == (status, "out\n", False)


@BOTH
def test_a_timeout_keeps_partial_output_kills_the_group_and_exits_124(
    run: Callable[..., ExecResult], tmp_path: Path
) -> None:
    marker = tmp_path / "grandchild"
    result = run(BashExecRequest(f"echo before; echo err >&2; sleep 300 & echo $! > {marker}; wait", timeout=0.5))
    assert result.timed_out and result.exit_code == 124
    assert (result.stdout, result.stderr) == ("before\n", "err\n")
    pid = int(marker.read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {pid} survived the timeout")


@BOTH
def test_huge_output_keeps_its_tail_and_spills(run: Callable[..., ExecResult], tmp_path: Path) -> None:
    result = run(BashExecRequest("seq 1 50000"), max_output=1000, spill_dir=tmp_path)
    assert result.stdout.endswith("49999\n50000\n") and result.stdout_spill is not None
    assert Path(result.stdout_spill).read_text().splitlines()[0] == "1"


@BOTH
def test_a_missing_workdir_is_a_clear_error(run: Callable[..., ExecResult], tmp_path: Path) -> None:
    with pytest.raises(ExecError, match=r"working directory .* does not exist"):
        run(BashExecRequest("true", cwd=str(tmp_path / "absent")))


INTERRUPTED_RUN = """
import os, signal, sys
from dsh.bash import BashExecRequest, Interrupted, Interrupts, LocalExecutor

with Interrupts([signal.SIGTERM]) as interrupts:
    try:
        LocalExecutor().run_sync(BashExecRequest(f"echo $$ > {sys.argv[1]}; sleep 300 & wait"))
    except Interrupted as exc:
        print(f"interrupted by {exc.reason}", flush=True)
"""


def test_a_signal_interrupts_a_blocking_run_killing_and_reaping_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED_RUN, str(pidfile)], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.02)
        pgid = int(pidfile.read_text())
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, out) == (0, "interrupted by SIGTERM\n")
    for _ in range(100):  # the backgrounded sleep, reparented, may linger as a zombie a moment
        if not group_members(pgid):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"process group {pgid} outlived the interruption: {group_members(pgid)}")


LATE_SIGNAL = """
import os, signal
from dsh.bash import BashExecRequest, Interrupted, Interrupts, LocalExecutor

with Interrupts([signal.SIGTERM]):
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # no command started yet: raised at once
        print("went on", flush=True)
    except Interrupted as exc:
        print(f"at once: {exc.reason}", flush=True)
with Interrupts([signal.SIGTERM]):
    try:
        with Interrupts.protected():
            os.kill(os.getpid(), signal.SIGTERM)  # inside a protected section (a flush): kept
            print("section finished", flush=True)
    except Interrupted as exc:
        print(f"after the section: {exc.reason}", flush=True)
    try:
        LocalExecutor().run_sync(BashExecRequest("echo ran"))
    except Interrupted as exc:
        print(f"not started: {exc.reason}", flush=True)
"""


def test_a_signal_before_any_command_stops_at_once_or_when_its_protected_section_ends() -> None:
    done = subprocess.run([sys.executable, "-c", LATE_SIGNAL], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (
        0,
        "at once: SIGTERM\nsection finished\nafter the section: SIGTERM\nnot started: SIGTERM\n",
    ), done.stderr


STALLED_RUN = """
import asyncio, json, sys
from dsh.bash import BashExecRequest, LocalExecutor

request = BashExecRequest(sys.argv[2], timeout=float(sys.argv[3]))
executor = LocalExecutor(max_output=10**7)
result = executor.run_sync(request) if sys.argv[1] == "run_sync" else asyncio.run(executor.run(request))
print(json.dumps([result.exit_code, result.timed_out, len(result.stdout), result.stderr]))
"""


@pytest.mark.parametrize("how", ["run_sync", "run"])
def test_a_command_that_ended_while_dsh_was_stopped_past_its_deadline_keeps_its_status_and_output(
    tmp_path: Path, how: str
) -> None:
    # Before: dsh woke past the deadline, read one chunk of each pipe, saw the shell had exited and
    # stopped reading there (run_sync: exit 3 with 64 KiB of the 500 KB), or had not yet seen the
    # exit and called it a timeout (run: 124).
    marker = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, "-c", STALLED_RUN, how, stalled_command(marker), str(STALLED_TIMEOUT)],
        stdout=subprocess.PIPE,
        text=True,
    )
    stall(proc.pid, marker)
    stdout, _ = proc.communicate(timeout=60)
    assert json.loads(stdout) == [3, False, 500000, "done\n"]


ONE_WORD = "echo " + "x" * 200_000
"""A command line over the kernel's 128 KiB limit for one argument."""


@pytest.mark.parametrize("how", ["run_sync", "run", "start"])
def test_a_command_over_the_kernels_argument_limit_fails_with_one_line_naming_it(how: str) -> None:
    # Before: OSError "[Errno 7] Argument list too long: 'bash'" escaped the executor.
    executor = LocalExecutor()
    request = BashExecRequest(ONE_WORD)

    def run() -> object:
        if how == "run_sync":
            return executor.run_sync(request)
        return asyncio.run(executor.run(request) if how == "run" else executor.start(request))  # type: ignore[arg-type]

    with pytest.raises(ExecError) as caught:
        run()
    assert str(caught.value) == (
        "the command is 200006 bytes, over the kernel's limit of 131072 bytes for one argument (MAX_ARG_STRLEN); "
        "split it into smaller commands (a long here-document appended in parts) or run it from a file"
    )


def test_an_environment_over_the_limits_is_named() -> None:
    with pytest.raises(ExecError, match=r"^environment variable BIG is over the kernel's limit of 131072 bytes"):
        LocalExecutor(ambient={"PATH": os.environ["PATH"], "BIG": "y" * 140_000}).run_sync(BashExecRequest("true"))
    many = {"PATH": os.environ["PATH"], **{f"V{i}": "y" * 100_000 for i in range(30)}}
    with pytest.raises(ExecError, match=r"^the command and its environment are \d+ bytes, over the system's limit"):
        LocalExecutor(ambient=many).run_sync(BashExecRequest("true"))
