"""The local executor against real bash children."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, ChannelError, LocalExecutor, interrupted_result, interruption
from dsh.bash.aio import CommandCancelled


def run(request: BashExecRequest, **kwargs: object) -> object:
    return asyncio.run(LocalExecutor(**kwargs).run(request))  # type: ignore[arg-type]


def test_child_sees_exactly_the_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_STALE", "outer")
    monkeypatch.setenv("dsh_stale", "outer-lower")
    monkeypatch.setenv("DSH_SESSION_ID", "outer-session")
    monkeypatch.setenv("MY_API_KEY", "secret")
    monkeypatch.setenv("PLAIN", "kept")
    before = dict(os.environ)
    result = run(
        BashExecRequest(
            "env | sort",
            env={"HOOK_ONLY": "yes"},
            dsh_env={"DSH_SESSION_ID": "inner", "DSH_SHELL": "1"},
        )
    )
    lines = set(result.stdout.splitlines())  # type: ignore[attr-defined]
    managed = {line for line in lines if line.upper().startswith("DSH_")}
    assert managed == {"DSH_SESSION_ID=inner", "DSH_SHELL=1"}
    assert "PLAIN=kept" in lines and "HOOK_ONLY=yes" in lines
    assert not any(line.startswith("MY_API_KEY=") for line in lines)
    assert "TERM=dumb" in lines and "NO_COLOR=1" in lines
    assert dict(os.environ) == before


def test_channel_violation_raises_before_spawning() -> None:
    with pytest.raises(ChannelError):
        run(BashExecRequest("true", env={"DSH_SESSION_ID": "spoof"}))


def test_exit_code_stdout_stderr_stdin_and_cwd(tmp_path: Path) -> None:
    result = run(
        BashExecRequest("pwd; read line; echo got:$line; echo oops >&2; exit 3", cwd=str(tmp_path), stdin="hi\n")
    )
    assert result.exit_code == 3  # type: ignore[attr-defined]
    assert result.stdout == f"{tmp_path}\ngot:hi\n"  # type: ignore[attr-defined]
    assert result.stderr == "oops\n"  # type: ignore[attr-defined]


def test_input_larger_than_a_pipe_reaches_a_slow_reader_and_an_ignoring_command_does_not_hang() -> None:
    payload = "x" * 1_000_000
    slow = run(BashExecRequest("sleep 0.2; wc -c", stdin=payload, timeout=30))
    assert (slow.exit_code, slow.stdout.strip()) == (0, "1000000")  # type: ignore[attr-defined]
    ignored = run(BashExecRequest("echo done", stdin=payload, timeout=30))
    assert (ignored.exit_code, ignored.stdout, ignored.timed_out) == (0, "done\n", False)  # type: ignore[attr-defined]


def test_without_a_pidfd_the_exit_is_still_seen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Kernels before Linux 5.3 (and other systems) have no pidfd: a thread waits for the shell instead.
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    done = run(BashExecRequest("echo out; echo err >&2; exit 5", timeout=30))
    assert (done.exit_code, done.stdout, done.stderr) == (5, "out\n", "err\n")  # type: ignore[attr-defined]
    marker = tmp_path / "held.pid"
    held = run(BashExecRequest(f"(sleep 30 & echo $! > {marker}); echo started", timeout=30))
    os.kill(int(marker.read_text()), signal.SIGKILL)
    assert (held.exit_code, held.stdout, held.timed_out) == (0, "started\n", False)  # type: ignore[attr-defined]
    late = run(BashExecRequest("echo before; sleep 30", timeout=0.3))
    assert (late.exit_code, late.stdout, late.timed_out) == (124, "before\n", True)  # type: ignore[attr-defined]


def test_a_sink_that_fails_kills_the_group_and_its_error_propagates(tmp_path: Path) -> None:
    from dsh.bash._capture import Capture
    from dsh.bash.aio import wait_async

    class Full(Capture):
        def feed(self, chunk: bytes) -> None:
            raise MemoryError("no room for output")

    marker = tmp_path / "pid"
    spec = LocalExecutor().spec(BashExecRequest(f"echo $$ > {marker}; sleep 300 & echo out; wait", timeout=20))
    sink = Full("stdout", max_output=100, spill_dir=tmp_path)
    started = time.monotonic()
    with pytest.raises(MemoryError, match="no room"):
        asyncio.run(wait_async(spec, sink, Capture("stderr", max_output=100, spill_dir=tmp_path)))
    assert time.monotonic() - started < 10, "the call waited for the command instead of killing it"
    pgid = int(marker.read_text())
    for _ in range(100):  # the killed grandchild is reparented and reaped by init, a moment later
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the group outlived the failed call")


def test_timeout_kills_the_whole_group_including_a_sleeping_grandchild(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = run(BashExecRequest(f"sleep 300 & echo $! > {marker}; wait", timeout=0.5))
    assert time.monotonic() - started < 10
    assert result.timed_out and result.exit_code != 0  # type: ignore[attr-defined]
    pid = int(marker.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {pid} survived the timeout")


def test_huge_output_keeps_its_tail_and_spills_the_rest(tmp_path: Path) -> None:
    result = run(BashExecRequest("seq 1 50000"), max_output=1000, spill_dir=tmp_path)
    assert result.stdout.endswith("49999\n50000\n")  # type: ignore[attr-defined]
    assert "truncated" in result.stdout and len(result.stdout) < 1200  # type: ignore[attr-defined]
    spill = Path(result.stdout_spill)  # type: ignore[attr-defined]
    assert spill.parent == tmp_path and spill.read_text().splitlines()[0] == "1"
    assert str(spill) in result.stdout  # type: ignore[attr-defined]


def test_background_process_reads_incrementally_and_stops() -> None:
    async def scenario() -> tuple[str, str, int]:
        executor = LocalExecutor()
        task = await executor.start(BashExecRequest("echo first; sleep 30; echo never"))
        for _ in range(100):
            await asyncio.sleep(0.02)
            out, _ = task.read()
            if out:
                break
        code = await task.stop(grace=0.5)
        rest, _ = task.read()
        return out, rest, code

    first, rest, code = asyncio.run(scenario())
    assert first == "first\n" and "never" not in rest and code != 0


def test_missing_workdir_is_a_clear_error(tmp_path: Path) -> None:
    from dsh.bash import ExecError
    from dsh.core import DshError

    with pytest.raises(DshError, match=r"working directory .* does not exist") as err:
        run(BashExecRequest("true", cwd=str(tmp_path / "absent")))
    assert isinstance(err.value, ExecError) and err.value.path == str(tmp_path / "absent")


def test_a_timeout_keeps_the_output_printed_before_it_and_exits_124() -> None:
    result = run(BashExecRequest("echo before; echo err >&2; sleep 30; echo after", timeout=0.5))
    assert result.timed_out and result.exit_code == 124  # type: ignore[attr-defined]
    assert result.stdout == "before\n" and result.stderr == "err\n"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("command", "status"), [("kill -TERM $$", 143), ("kill -KILL $$", 137), ("exit 3", 3)])
def test_a_command_killed_by_signal_n_exits_128_plus_n(command: str, status: int) -> None:
    result = run(BashExecRequest(f"echo out; {command}"))
    assert result.exit_code == status and not result.timed_out  # type: ignore[attr-defined]
    assert result.stdout == "out\n"  # type: ignore[attr-defined]


def test_cancelling_a_run_kills_and_reaps_the_group(tmp_path: Path) -> None:
    marker = tmp_path / "pid"

    async def scenario() -> None:
        task = asyncio.ensure_future(LocalExecutor().run(BashExecRequest(f"echo $$ > {marker}; sleep 300")))
        while not marker.exists() or not marker.read_text().strip():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    pgid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)  # the leader was reaped and every member is gone


def test_a_cancellation_for_a_signal_is_that_signals_interruption_with_what_the_command_printed(
    tmp_path: Path,
) -> None:
    """Under asyncio a signal cancels the run (``task.cancel(reason)``): the executor raises it as
    ``CommandCancelled``, an ``asyncio.CancelledError`` that ``interruption`` reads as the signal's
    and that carries the output with ``128+N``, as ``run_sync`` carries it on ``Interrupted``."""
    marker = tmp_path / "started"

    async def scenario() -> BaseException:
        task = asyncio.ensure_future(LocalExecutor().run(BashExecRequest(f"echo before; touch {marker}; sleep 300")))
        while not marker.exists():
            await asyncio.sleep(0.02)
        task.cancel("SIGTERM")
        try:
            await task
        except asyncio.CancelledError as exc:
            return exc
        raise AssertionError("the cancelled run returned")

    exc = asyncio.run(scenario())
    assert isinstance(exc, CommandCancelled)
    assert interruption(exc) == "SIGTERM"
    printed = interrupted_result(exc)
    assert printed is not None and printed.exit_code == 128 + signal.SIGTERM and printed.stdout == "before\n"


def _running(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if marker.encode() in cmdline and state not in ("Z", "X"):
                found.append(int(entry))
    return found


CANCEL_DURING_SPAWN = """
import asyncio, sys
from dsh.bash import BashExecRequest, LocalExecutor

async def scenario(steps):
    task = asyncio.ensure_future(LocalExecutor().run(BashExecRequest(f"sleep {sys.argv[1]} & wait")))
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass

for steps in range(12):
    asyncio.run(scenario(steps))
"""


def test_cancelling_at_any_point_of_the_spawn_leaves_no_process() -> None:
    # In a child process: the failure this guards against is a hang (asyncio waiting on the pipes
    # of a child it never killed), which must fail the test, not freeze the suite.
    marker = f"300.{os.getpid()}{time.monotonic_ns() % 10**9}"
    try:
        subprocess.run([sys.executable, "-c", CANCEL_DURING_SPAWN, marker], timeout=60, check=True)
    except subprocess.TimeoutExpired:
        for pid in _running(marker):
            os.kill(pid, signal.SIGKILL)
        pytest.fail("run() never returned after a cancel during the spawn")
    for _ in range(60):
        if not _running(marker):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"{_running(marker)} kept running after a cancelled run()")


def test_a_startup_file_in_the_ambient_environment_cannot_restore_stale_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    startup = tmp_path / "startup.sh"
    startup.write_text("export DSH_SESSION_ID=stale-outer\nexport DSH_SESSION_JSONL=/outer.jsonl\n")
    monkeypatch.setenv("BASH_ENV", str(startup))
    monkeypatch.setenv("ENV", str(startup))
    result = run(
        BashExecRequest(
            'echo "$DSH_SESSION_ID ${DSH_SESSION_JSONL-unset} ${BASH_ENV-none}"',
            dsh_env={"DSH_SESSION_ID": "inner"},
        )
    )
    assert result.stdout == "inner unset none\n"  # type: ignore[attr-defined]


SHELL_CODE_AMBIENT = {
    "PATH": os.environ["PATH"],
    "SHELLOPTS": "xtrace",
    "BASHOPTS": "extdebug",
    "PS4": "$((DSH_SHELL=0,DSH_SESSION_ID=666))",
    "BASH_FUNC_printenv%%": "() { echo faked; }",
    "BASH_FUNC_env()": "() { echo faked; }",
}


@pytest.mark.parametrize("nested", [False, True], ids=["child", "grandchild"])
def test_ambient_shell_options_trace_prompt_and_functions_cannot_rewrite_the_snapshot(nested: bool) -> None:
    command = "printenv DSH_SHELL DSH_SESSION_ID; env | grep -c -e ^BASH_FUNC_ -e ^SHELLOPTS= -e ^PS4= -e ^BASHOPTS="
    if nested:
        command = f"bash -c {command!r}"
    result = run(
        BashExecRequest(command, dsh_env={"DSH_SHELL": "1", "DSH_SESSION_ID": "inner"}),
        ambient=SHELL_CODE_AMBIENT,
    )
    # Unscrubbed, the trace prompt set DSH_SHELL=0 (and traced every command to stderr), and the
    # exported printenv printed "faked".
    assert (result.stdout, result.stderr) == ("1\ninner\n0\n", "")  # type: ignore[attr-defined]


def test_a_request_s_ambient_environment_replaces_this_process_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """A served call's client environment travels in the request (``ambient``), not in process state."""
    monkeypatch.setenv("SERVER_ONLY", "server")
    request = BashExecRequest(
        'echo "${CLIENT_ONLY-none} ${SERVER_ONLY-none}"', ambient={"CLIENT_ONLY": "client", "PATH": os.defpath}
    )
    assert run(request).stdout == "client none\n"  # type: ignore[attr-defined]
    assert run(request._replace(ambient=None)).stdout == "none server\n"  # type: ignore[attr-defined]
    # An executor's own ambient (the SSH executor's empty one) still wins over the request's.
    assert run(request, ambient={"PATH": os.defpath}).stdout == "none none\n"  # type: ignore[attr-defined]
