"""The executor under a hostile environment and hostile timing, through the real ``dsh`` command,
in-process and served: ambient shell code, live spills, stalls across the deadline, kills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.testing import STALLED_TIMEOUT, stall, stalled_command, wait_for_group_end, wait_for_group_size
from tests.helpers import dsh
from tests.integration.serve_support import ServeProcess

pytestmark = pytest.mark.integration


@pytest.fixture(params=["in-process", "served"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeProcess | None]:
    """Each test runs against a ``dsh exec`` alone and against one a ``dsh serve`` answers."""
    if request.param == "in-process":
        yield None
        return
    server = ServeProcess(tmp_path / "home")
    yield server
    server.stop()


def _exec(home: Path, *command: str, env: dict[str, str] | None = None) -> dict[str, object]:
    proc = dsh("exec", "--json", "--", *command, home=home, env=env)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_ambient_xtrace_and_its_prompt_do_not_reach_the_command(tmp_path: Path, served: ServeProcess | None) -> None:
    env = {
        "SHELLOPTS": "xtrace",
        "PS4": "$((DSH_SHELL=0,DSH_SESSION_ID=666))",
        "BASH_FUNC_printenv%%": "() { echo faked; }",
    }
    outcome = _exec(tmp_path / "home", "printenv DSH_SHELL; bash -c 'printenv DSH_SHELL'", env=env)
    assert (outcome["exit_code"], outcome["stdout"], outcome["stderr"]) == (0, "1\n1\n", "")


BOTH_140MB = "head -c 140000000 /dev/zero | tr '\\0' o; head -c 140000000 /dev/zero | tr '\\0' e >&2"


def test_a_140_mb_stdout_and_stderr_command_keeps_its_status_and_both_spills(tmp_path: Path) -> None:
    # The issue's own command, at its size (about 3 s): each stream alone is over the folder's budget.
    outcome = _exec(tmp_path / "home", BOTH_140MB)
    assert outcome["exit_code"] == 0, outcome["stderr"]
    for stream, letter in (("stdout", "o"), ("stderr", "e")):
        text = str(outcome[stream])
        note, tail = text.split("\n", 1)
        assert note.startswith(f"[{stream} truncated: showing the last 30000 of 140000000 characters; full text in ")
        assert tail == letter * 30000
        spill = Path(note.removesuffix("]").rsplit(" ", 1)[1])
        assert spill.parent == tmp_path / "home" / "output" and spill.stat().st_size == 140_000_000


def test_concurrent_big_commands_all_keep_their_spills(tmp_path: Path, served: ServeProcess | None) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "deployment.yaml").write_text(
        "plugins:\n  - {id: bash-local, name: bash-local, config: {max_output: 100, spill_budget: 100000}}\n"
    )
    if served is not None:  # the server booted before the file existed: start it again on it
        served.stop()
        served = ServeProcess(home)
    try:
        command = "for i in 1 2 3; do seq 1 20000; seq 1 20000 >&2; sleep 0.2; done"
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "dsh.cli", "exec", "--json", "--", command],
                env={**os.environ, "DSH_HOME": str(home)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        outcomes = [json.loads(proc.communicate(timeout=120)[0]) for proc in procs]
    finally:
        if served is not None:
            served.stop()
    for outcome in outcomes:
        assert outcome["exit_code"] == 0, outcome["stderr"]
        for stream in ("stdout", "stderr"):
            note = str(outcome[stream]).split("\n", 1)[0]
            spill = Path(note.removesuffix("]").rsplit(" ", 1)[1])
            assert spill.read_text().count("\n") == 60000, note


def test_a_command_that_ended_while_dsh_was_stopped_past_its_timeout_reports_its_own_status(
    tmp_path: Path, served: ServeProcess | None
) -> None:
    # Ctrl-Z then `fg` of a `dsh exec` (or a stalled server): the command ended in time, unwatched.
    marker = tmp_path / "started"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsh.cli",
            "exec",
            "--json",
            "--timeout",
            str(STALLED_TIMEOUT),
            "--",
            stalled_command(marker),
        ],
        env={**os.environ, "DSH_HOME": str(tmp_path / "home")},
        stdout=subprocess.PIPE,
        text=True,
    )
    stall(proc.pid if served is None else served.pid, marker)
    outcome = json.loads(proc.communicate(timeout=60)[0])
    assert (outcome["exit_code"], outcome["timed_out"], outcome["stderr"]) == (3, False, "done\n")
    note, tail = str(outcome["stdout"]).split("\n", 1)
    assert note.startswith("[stdout truncated: showing the last 30000 of 500000 characters; full text in ")
    assert Path(note.removesuffix("]").rsplit(" ", 1)[1]).read_bytes() == b"x" * 500000


def test_a_command_over_the_kernels_argument_limit_is_one_clear_line(
    tmp_path: Path, served: ServeProcess | None
) -> None:
    # Words under the limit each, which dsh exec joins into one command line over it.
    proc = dsh("exec", "--", "echo", "x" * 100_000, "y" * 100_000, home=tmp_path / "home")
    assert (proc.returncode, proc.stdout) == (125, "")
    assert proc.stderr.startswith("dsh: the command is 200007 bytes, over the kernel's limit of 131072 bytes"), (
        proc.stderr
    )
    assert proc.stderr.count("\n") == 1


def test_sigkill_of_dsh_ends_the_commands_whole_group(tmp_path: Path, served: ServeProcess | None) -> None:
    # SIGKILL cannot be caught: dsh's supervisor kills the group once dsh is gone (before: orphans for 300 s).
    marker = tmp_path / "pgid"
    command = f"sleep 300 & sleep 300 & echo $$ > {marker}.tmp && mv {marker}.tmp {marker}; wait"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "exec", "--", command],
        env={**os.environ, "DSH_HOME": str(tmp_path / "home")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the command never started"
            time.sleep(0.01)
        pgid = int(marker.read_text())
        assert len(wait_for_group_size(pgid, 3)) == 3  # the shell and its two sleeps (the mv may still exit)
        os.kill(proc.pid if served is None else served.pid, signal.SIGKILL)
        left = wait_for_group_end(pgid)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert left == [], f"process group {pgid} outlived a SIGKILL of dsh"
    finally:
        proc.kill()
        proc.wait()
