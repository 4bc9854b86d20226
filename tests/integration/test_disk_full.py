"""A full disk where dsh keeps its state: one line naming the file dsh could not write, never a bare errno."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.testing import needs_root
from tests.helpers import dsh

pytestmark = [pytest.mark.integration, needs_root]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of its own (root may mount), unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(disk)], check=True)
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def _fill(disk: Path) -> None:
    # `dd` stops at the first short write, leaving the disk without a byte free.
    proc = subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'filler'}", "bs=4k"], capture_output=True, check=False)
    assert b"No space left on device" in proc.stderr


def test_a_full_disk_when_taking_the_session_lock_names_the_lock(small_disk: Path) -> None:
    home = small_disk / "home"
    assert dsh("exec", "--", "true", home=home).returncode == 0  # the home and its folders exist
    _fill(small_disk)
    proc = dsh("exec", "--", "echo ran", home=home)
    assert proc.returncode == 125 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"dsh: cannot take the session lock {home}/sessions/"), line
    assert line.endswith(".jsonl.lock: No space left on device"), line
