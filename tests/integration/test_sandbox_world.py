"""`dsh exec` with bash-sandbox in place of bash-local: the facts a sandboxed child gets are true there."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.bash import SHELL_EXECUTOR
from dsh.bash_sandbox import SandboxExecutor, plugin
from dsh.core import FiberState
from dsh.loader import root as loader_root
from tests.helpers import dsh

pytestmark = [pytest.mark.integration, pytest.mark.system_parts("bubblewrap")]


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp, which a sandbox replaces with its own."""
    path = Path(tempfile.mkdtemp(prefix="dsh-world-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _deployment(folder: Path, config: str = "{mode: read-only}") -> Path:
    path = folder / "deployment.yaml"
    path.write_text(f"plugins:\n  - {{id: bash-local, name: bash-sandbox, config: {config}}}\n")
    return path


def _exec(deployment: Path, home: Path, command: str, cwd: Path) -> dict[str, object]:
    done = dsh("exec", "--json", "--deployment", str(deployment), "--", command, home=home, cwd=cwd)
    out: dict[str, object] = json.loads(done.stdout)
    return out


def _dsh_vars(stdout: object) -> dict[str, str]:
    assert isinstance(stdout, str)
    return dict(line.split("=", 1) for line in stdout.splitlines() if line.startswith("DSH_"))


def test_a_home_the_sandbox_can_read_is_passed_with_its_transcript(outside_tmp: Path) -> None:
    home = outside_tmp / "home"
    out = _exec(_deployment(outside_tmp), home, "env; cat $DSH_SESSION_JSONL 2>/dev/null; true", outside_tmp)
    facts = _dsh_vars(out["stdout"])
    location = out["location"]
    assert isinstance(location, dict)
    assert facts["DSH_HOME"] == str(home) and facts["DSH_SESSION_JSONL"] == location["path"]
    assert facts["DSH_SESSION_ID"] == out["session_id"]
    assert facts["DSH_DEPLOYMENT"] == str(outside_tmp / "deployment.yaml"), "readable in the sandbox"


def test_a_home_under_the_private_tmp_is_not_passed(tmp_path: Path, outside_tmp: Path) -> None:
    out = _exec(_deployment(outside_tmp), tmp_path / "home", "env", outside_tmp)
    facts = _dsh_vars(out["stdout"])
    assert "DSH_HOME" not in facts and "DSH_SESSION_JSONL" not in facts
    assert facts["DSH_SESSION_ID"] == out["session_id"] and facts["DSH_SHELL"] == "1"


def test_a_hidden_home_is_not_passed(outside_tmp: Path) -> None:
    home = outside_tmp / "home"
    out = _exec(_deployment(outside_tmp, f"{{mode: read-only, hide: [{home}]}}"), home, "env", outside_tmp)
    assert "DSH_HOME" not in _dsh_vars(out["stdout"]) and "DSH_SESSION_JSONL" not in _dsh_vars(out["stdout"])


def test_a_denied_write_is_recorded_and_told(outside_tmp: Path) -> None:
    home = outside_tmp / "home"
    out = _exec(_deployment(outside_tmp), home, "echo x > made", outside_tmp)
    assert out["exit_code"] == 1 and not (outside_tmp / "made").exists()
    assert "dsh: the read-only sandbox denied a write" in str(out["stderr"])
    location = out["location"]
    assert isinstance(location, dict)
    events = [json.loads(line) for line in Path(location["path"]).read_text().splitlines()]
    results = [e for e in events if e.get("type") == "tool/result"]
    assert results and results[-1]["data"]["data"]["sandbox"] == {
        "mode": "read-only",
        "confined": True,
        "network": False,
        "denied": True,
    }, results


def test_no_bubblewrap_means_nothing_runs(outside_tmp: Path) -> None:
    deployment = _deployment(outside_tmp, f"{{mode: read-only, bwrap: {outside_tmp}/nope}}")
    done = dsh(
        "exec",
        "--deployment",
        str(deployment),
        "--",
        f"touch {outside_tmp}/ran",
        home=outside_tmp / "h",
        cwd=outside_tmp,
    )
    assert done.returncode == 125 and not (outside_tmp / "ran").exists()
    assert "the read-only sandbox cannot run: bubblewrap" in done.stderr and len(done.stderr.splitlines()) == 1


def test_sigterm_to_dsh_exec_kills_the_sandboxed_command(outside_tmp: Path) -> None:
    tag = f"{os.getpid() % 1000 + 6000}.25"
    env = {**os.environ, "DSH_HOME": str(outside_tmp / "h")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsh.cli",
            "exec",
            "--deployment",
            str(_deployment(outside_tmp)),
            "--",
            f"sleep {tag}",
        ],
        env=env,
        cwd=outside_tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not _alive(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(tag), "the command never started"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    time.sleep(0.2)
    assert _alive(tag) == []


def _alive(tag: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", tag.encode()]:
                found.append(entry)
    return found


def test_dsh_env_says_per_key_whether_the_sandbox_passes_it(tmp_path: Path, outside_tmp: Path) -> None:
    done = dsh("env", "--json", "--deployment", str(_deployment(outside_tmp)), home=tmp_path / "home")
    out = json.loads(done.stdout)
    assert out["world"] == {"kind": "sandbox", "label": "the read-only sandbox"}
    rows = {r["key"]: r for r in out["variables"]}
    assert rows["DSH_HOME"]["passes"] is False
    assert rows["DSH_HOME"]["why"] == f"{tmp_path / 'home'} is hidden in the read-only sandbox"
    assert rows["DSH_SESSION_ID"]["passes"] is True and rows["DSH_DEPLOYMENT"]["passes"] is True
    assert rows["DSH_SESSION_JSONL"]["passes"] is None
    text = dsh("env", "--deployment", str(_deployment(outside_tmp)), home=tmp_path / "home").stdout
    assert text.startswith("the shell executor's children run in the read-only sandbox (sandbox)\n")
    assert f"    here: not passed ({tmp_path / 'home'} is hidden in the read-only sandbox)\n" in text


def test_the_plugin_refuses_an_unknown_mode_and_provides_the_executor(tmp_path: Path) -> None:
    # Plugin configs are validated by the kernel a loader makes (dsh-bash-sandbox has no loader of its own).
    root = loader_root()
    failed = root.plugin(plugin, {"mode": "read-write"})
    assert failed.state is FiberState.FAILED
    assert failed.error == (
        "plugin 'bash-sandbox' has invalid config: field 'config.mode' must be one of "
        "'read-only', 'workspace-write' or 'full'"
    )
    fiber = root.plugin(plugin, {"mode": "workspace-write", "network": True, "spill_dir": str(tmp_path)})
    assert fiber.state is FiberState.ACTIVE, fiber.error
    executor = root.require(SHELL_EXECUTOR)
    assert isinstance(executor, SandboxExecutor) and executor.mode == "workspace-write" and executor.network
