"""Spilled output: private, exclusive, unpredictable, pruned by age and total size."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, LocalExecutor
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
