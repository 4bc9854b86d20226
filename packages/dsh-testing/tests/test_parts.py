"""System parts: a test that needs a missing Debian package skips naming it (fails under CI=true)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.testing import SYSTEM_PARTS, missing_parts, missing_reason

MARKED = """
import pytest

@pytest.mark.system_parts("bubblewrap")
def test_needs_bwrap(never_started):
    pass

@pytest.fixture
def never_started():
    raise RuntimeError("the fixture ran although bwrap is missing")

@pytest.fixture(scope="session")
def server():
    from dsh.testing import require_parts
    require_parts("bubblewrap")  # as postgres_server does for postgresql
    raise RuntimeError("the server started although bwrap is missing")

def test_needs_a_server(server):
    pass
"""


def _run_marked(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_marked.py").write_text(MARKED)
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PATH": str(empty)}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider", "test_marked.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_missing_part_skips_naming_the_package_and_its_install_command(tmp_path: Path) -> None:
    done = _run_marked(tmp_path, ci=None)
    assert done.returncode == 0 and "2 skipped" in done.stdout, done.stdout
    assert "needs the Debian package bubblewrap" in done.stdout
    assert "`sudo apt-get install bubblewrap`" in done.stdout
    assert "the fixture ran" not in done.stdout and "the server started" not in done.stdout


def test_under_ci_a_missing_part_fails_the_test(tmp_path: Path) -> None:
    done = _run_marked(tmp_path, ci="true")
    assert done.returncode == 1 and "skipped" not in done.stdout, done.stdout
    assert "2 failed" in done.stdout and "error" not in done.stdout.lower(), done.stdout
    assert "CI=true: a missing system part fails the run" in done.stdout
    assert "the fixture ran" not in done.stdout and "the server started" not in done.stdout


def test_presence_follows_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert missing_parts("jq") == ["jq"]
    jq = tmp_path / "jq"
    jq.write_text("#!/bin/sh\n")
    jq.chmod(0o755)
    assert missing_parts("jq") == []


def test_every_part_says_what_it_gives_and_an_unknown_one_is_refused() -> None:
    assert set(SYSTEM_PARTS) == {"bubblewrap", "openssh-server", "postgresql", "jq"}
    assert "sudo apt-get install jq postgresql" in missing_reason(["jq", "postgresql"])
    with pytest.raises(KeyError, match="unknown system part 'bwrap'; the known ones: bubblewrap"):
        missing_parts("bwrap")
