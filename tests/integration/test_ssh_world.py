"""`dsh exec` with bash-ssh in place of bash-local, against a real sshd: the remote child gets only facts true there."""

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

from dsh.bash_ssh.testing import TemporaryHost
from tests.helpers import dsh

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def host() -> Iterator[TemporaryHost]:
    server = TemporaryHost(environment="DSH_SESSION_ID=stale\nDSH_SESSION_JSONL=/stale.jsonl\n")
    server.setup()
    try:
        yield server
    finally:
        server.cleanup()


def _deployment(folder: Path, host: TemporaryHost, extra: str = "") -> Path:
    path = folder / "deployment.yaml"
    path.write_text(
        "plugins:\n  - id: bash-local\n    name: bash-ssh\n    config:\n"
        f"      host: {host.host}\n      port: {host.port}\n      user: {host.user}\n"
        f"      identity_file: {host.identity_file}\n      known_hosts: {host.known_hosts}\n{extra}"
    )
    return path


def _facts(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if line.startswith("DSH_"))


def test_a_remote_child_gets_the_identity_but_no_local_paths(host: TemporaryHost, tmp_path: Path) -> None:
    done = dsh(
        "exec", "--json", "--deployment", str(_deployment(tmp_path, host)),
        "--cwd", str(host.home), "--", "env; id -un", home=tmp_path / "h",
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert out["exit_code"] == 0, out
    facts = _facts(out["stdout"])
    assert facts["DSH_SESSION_ID"] == out["session_id"] and facts["DSH_SHELL"] == "1"
    assert "DSH_HOME" not in facts and "DSH_SESSION_JSONL" not in facts, facts
    assert "DSH_DEPLOYMENT" not in facts, "the deployment file is on this machine, not on the host"
    assert out["stdout"].endswith(f"{host.user}\n")
    assert Path(out["location"]["path"]).is_file(), "the transcript is the harness's, on this machine"


def test_a_declared_remote_home_and_shared_sessions_folder_are_passed(host: TemporaryHost, tmp_path: Path) -> None:
    home = tmp_path / "h"
    extra = f"      dsh_home: /srv/dsh\n      shared: [{home}/sessions]\n"
    done = dsh(
        "exec", "--json", "--deployment", str(_deployment(tmp_path, host, extra)),
        "--cwd", str(host.home), "--", "env", home=home,
    )  # fmt: skip
    out = json.loads(done.stdout)
    facts = _facts(out["stdout"])
    assert facts["DSH_HOME"] == "/srv/dsh" and facts["DSH_SESSION_JSONL"] == out["location"]["path"], facts


def test_an_unreachable_host_runs_nothing_and_says_so_in_one_line(host: TemporaryHost, tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text(
        "plugins:\n  - {id: bash-local, name: bash-ssh, config: "
        f"{{host: 127.0.0.1, port: 1, known_hosts: {host.known_hosts}, connect_timeout: 5}}}}\n"
    )
    done = dsh("exec", "--deployment", str(deployment), "--", "true", home=tmp_path / "h")
    assert done.returncode == 125 and "cannot reach ssh host 127.0.0.1:1: " in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_sigterm_to_dsh_exec_kills_the_remote_process_group(host: TemporaryHost, tmp_path: Path) -> None:
    tag = "4245.5"
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "dsh.cli", "exec", "--deployment", str(_deployment(tmp_path, host)),
            "--cwd", str(host.home), "--", f"sleep {tag} & sleep {tag}",
        ],
        env={**os.environ, "DSH_HOME": str(tmp_path / "h")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while len(host.pids(f"sleep\0{tag}")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(host.pids(f"sleep\0{tag}")) == 2, "the command never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    deadline = time.monotonic() + 3
    while host.pids(f"sleep\0{tag}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host.pids(f"sleep\0{tag}") == []
