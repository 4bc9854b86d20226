"""The local executor against real bash children."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, ChannelError, LocalExecutor


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
    from dsh.core import DshError

    with pytest.raises(DshError, match=r"working directory .* does not exist"):
        run(BashExecRequest("true", cwd=str(tmp_path / "absent")))
