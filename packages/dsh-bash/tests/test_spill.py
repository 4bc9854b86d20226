"""Spilled output: private, exclusive, unpredictable, pruned by age and total size."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, ExecResult, LocalExecutor
from dsh.bash import _spill as local


def _run(executor: LocalExecutor, command: str) -> tuple[str, str | None]:
    result = asyncio.run(executor.run(BashExecRequest(command)))
    return result.stdout, result.stdout_spill


def test_spills_are_pruned_by_age_then_by_total_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "output"
    executor = LocalExecutor(max_output=10, spill_dir=out)
    _, first = _run(executor, "seq 1 100")
    assert first is not None
    old = time.time() - local.SPILL_MAX_AGE - 60
    os.utime(first, (old, old))
    _, second = _run(executor, "seq 1 100")
    assert second is not None and not Path(first).exists() and Path(second).exists()

    finished = time.time() - 10  # written by a command that ended before the next one started
    os.utime(second, (finished, finished))
    monkeypatch.setattr(local, "SPILL_MAX_BYTES", 1000)
    _, third = _run(executor, "seq 1 300")  # 1092 bytes: over the cap by itself, kept as the newest
    assert third is not None
    assert sorted(p.name for p in out.iterdir()) == [Path(third).name]


def test_default_spill_directory_is_under_the_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    assert LocalExecutor().spill_dir == tmp_path / "home" / "output"


def test_an_output_directory_others_can_write_is_refused_and_the_output_still_shown(tmp_path: Path) -> None:
    out = tmp_path / "output"
    out.mkdir()
    os.chmod(out, 0o777)
    shown, spilled = _run(LocalExecutor(max_output=10, spill_dir=out), "seq 1 100")
    assert spilled is None and list(out.iterdir()) == []
    assert shown.startswith(
        "[stdout truncated: showing the last 10 of 292 characters; the full text was not kept: refusing output "
        f"directory {out}: it is writable by group or others (mode 0777); run `chmod 700 {out}`]\n"
    )
    assert shown.endswith("98\n99\n100\n")


def test_retention_removes_only_spill_files_and_a_tilde_means_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "shared-notes"
    out.mkdir(mode=0o700)
    draft = out / "thesis-draft.txt"
    draft.write_text("precious")
    old = time.time() - local.SPILL_MAX_AGE - 60
    os.utime(draft, (old, old))
    _, spilled = _run(LocalExecutor(max_output=10, spill_dir=out), "seq 1 100")
    assert spilled is not None and draft.read_text() == "precious"
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert LocalExecutor(spill_dir="~/.dsh/output").spill_dir == tmp_path / "user" / ".dsh" / "output"


BOTH_STREAMS = "seq 1 2000; seq 1 2000 >&2"  # 8893 bytes each: each stream alone is over the budget


@pytest.mark.parametrize("sync", [True, False], ids=["run_sync", "run"])
def test_a_commands_two_spills_are_both_kept_though_together_they_pass_the_budget(tmp_path: Path, sync: bool) -> None:
    # Before: finishing stdout's spill pruned stderr's (still open), then stderr's stat failed.
    executor = LocalExecutor(max_output=10, spill_dir=tmp_path / "out", spill_budget=1000)
    request = BashExecRequest(BOTH_STREAMS)
    result = executor.run_sync(request) if sync else asyncio.run(executor.run(request))
    assert result.exit_code == 0 and result.stdout_spill is not None and result.stderr_spill is not None
    for spill in (result.stdout_spill, result.stderr_spill):
        assert Path(spill).read_text().splitlines()[-1] == "2000"


def test_concurrent_commands_never_remove_each_others_live_or_new_spills(tmp_path: Path) -> None:
    # The slow command spills first and keeps writing; the quick one starts later, spills and
    # ends while the slow one runs. Neither prune may take the other's spill: the slow one's is
    # open, the quick one's was written after the slow command began.
    executor = LocalExecutor(max_output=10, spill_dir=tmp_path / "out", spill_budget=1000)

    async def both() -> tuple[ExecResult, ExecResult]:
        slow = asyncio.ensure_future(executor.run(BashExecRequest("seq 1 2000; sleep 0.6; seq 2001 2100")))
        await asyncio.sleep(0.2)
        quick = await executor.run(BashExecRequest("seq 1 3000"))
        return await slow, quick

    slow, quick = asyncio.run(both())
    assert slow.stdout_spill is not None and quick.stdout_spill is not None
    assert Path(slow.stdout_spill).read_text().splitlines()[-1] == "2100"
    assert Path(quick.stdout_spill).read_text().splitlines()[-1] == "3000"
    # Once both ended, they are old news: the next spill removes them (oldest first) to fit the budget.
    for spill in (slow.stdout_spill, quick.stdout_spill):
        os.utime(spill, (time.time() - 10, time.time() - 10))
    third = executor.run_sync(BashExecRequest("seq 1 100"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [Path(str(third.stdout_spill)).name]


SLOW_WRITER = """
import sys
from dsh.bash import BashExecRequest, LocalExecutor
executor = LocalExecutor(max_output=10, spill_dir=sys.argv[1], spill_budget=1000)
result = executor.run_sync(BashExecRequest("seq 1 2000; echo spilled > " + sys.argv[2] + "; sleep 0.8; seq 2001 2100"))
print(result.exit_code, result.stdout_spill)
"""


def test_another_processs_open_spill_is_live_however_old(tmp_path: Path) -> None:
    # A spill another dsh still writes is skipped even when its last write looks old: it is locked.
    out, marker = tmp_path / "out", tmp_path / "marker"
    writer = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(out), str(marker)], stdout=subprocess.PIPE, text=True
    )
    while not (marker.exists() and out.is_dir() and any(out.iterdir())):  # dsh read the output: it spills
        assert writer.poll() is None, writer.communicate()
        time.sleep(0.02)
    (live,) = out.iterdir()
    os.utime(live, (time.time() - local.SPILL_MAX_AGE - 60,) * 2)
    LocalExecutor(max_output=10, spill_dir=out, spill_budget=1000).run_sync(BashExecRequest("seq 1 3000"))
    stdout, _ = writer.communicate(timeout=30)
    code, path = stdout.split()
    assert (code, path) == ("0", str(live))
    assert live.read_text().splitlines()[-1] == "2100"
