"""`dsh serve` keeps a deployment loaded; `dsh exec` uses it when it listens and behaves the same."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.cli_fast._wire import socket_path
from tests.helpers import dsh

pytestmark = pytest.mark.integration


class Server:
    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSH_")}
        env["DSH_HOME"] = str(home)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dsh.cli", "serve"], env=env, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stderr is not None
        first = self.proc.stderr.readline()
        while first.startswith("dsh: warning: "):  # booted with warnings: still serving
            first = self.proc.stderr.readline()
        assert first.startswith("dsh serve: listening on "), first
        self.path = Path(first.removeprefix("dsh serve: listening on ").strip())

    def stop(self, sig: int = signal.SIGTERM) -> str:
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=30)
        return err


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def server(home: Path) -> Iterator[Server]:
    running = Server(home)
    yield running
    if running.proc.poll() is None:
        running.stop()


def test_served_exec_uses_the_clients_environment_and_cwd(server: Server, home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = dsh(
        "exec",
        "--json",
        "--",
        'echo "$DSH_SESSION_ID|$CLIENT_ONLY|${DSH_STALE-unset}|${MY_TOKEN-scrubbed}|$PWD"',
        home=home,
        cwd=work,
        env={"CLIENT_ONLY": "from-client", "DSH_STALE": "outer", "MY_TOKEN": "secret"},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stdout"] == f"{out['session_id']}|from-client|unset|scrubbed|{work}\n"
    assert Path(out["location"]["path"]).exists(), "flushed at the end of the turn, as in-process"
    log = server.stop()
    assert f"exec in session {out['session_id']} exited 0" in log
    assert not server.path.exists(), "the socket is removed on the way out"


def test_exit_codes_resume_and_no_server(server: Server, home: Path) -> None:
    first = json.loads(dsh("exec", "--json", "--", "exit 3", home=home).stdout)
    assert first["exit_code"] == 3
    again = dsh("exec", "--session", first["session_id"], "--", "echo $DSH_SESSION_ID", home=home)
    assert again.stdout.strip() == first["session_id"]
    local = json.loads(dsh("exec", "--json", "--no-server", "--", "true", home=home).stdout)
    log = server.stop()
    assert f"session {first['session_id']}" in log
    assert local["session_id"] not in log


def test_a_second_server_is_refused(server: Server, home: Path) -> None:
    proc = dsh("serve", home=home, timeout=30)
    assert proc.returncode == 1
    assert proc.stderr == f"dsh: a dsh server already listens on {server.path}\n"


def test_a_dead_servers_socket_falls_back_and_is_reclaimed(server: Server, home: Path) -> None:
    server.stop(signal.SIGKILL)
    assert server.path.exists()
    proc = dsh("exec", "--", "echo still here", home=home)
    assert proc.returncode == 0 and proc.stdout == "still here\n"
    again = Server(home)
    try:
        assert again.path == server.path
    finally:
        again.stop()


def test_socket_is_private(server: Server, home: Path) -> None:
    assert str(server.path) == socket_path(None, {"DSH_HOME": str(home)})
    assert oct(server.path.stat().st_mode & 0o777) == "0o600"
    assert oct(server.path.parent.stat().st_mode & 0o777) == "0o700"


def _guard(path: Path, command: str) -> None:
    group = {"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))


def test_a_server_enforces_the_hook_files_as_they_are_at_each_request(server: Server, home: Path) -> None:
    assert dsh("exec", "--", "echo before", home=home).stdout == "before\n"
    hooks = home / "hooks"
    hooks.mkdir(mode=0o700)
    guard = hooks / "claude.json"
    _guard(guard, "echo no >&2; exit 2")  # a guard added after the server booted
    guard.chmod(0o600)
    blocked = dsh("exec", "--", "echo RAN", home=home)
    assert (blocked.returncode, blocked.stdout) == (126, ""), blocked.stderr
    _guard(guard, "exit 0")  # the same file, edited to allow
    assert dsh("exec", "--", "echo allowed", home=home).stdout == "allowed\n"
    _guard(guard, "echo no >&2; exit 2")
    guard.chmod(0o666)  # anyone may now write the hooks: a cold exec refuses, so must the server
    refused = dsh("exec", "--", "echo RAN", home=home)
    assert (refused.returncode, refused.stdout) == (125, ""), refused.stderr
    assert str(guard) in refused.stderr and "0666" in refused.stderr, refused.stderr
    guard.chmod(0o600)
    again = dsh("exec", "--", "echo RAN", home=home)
    assert (again.returncode, again.stdout) == (126, ""), again.stderr
    unchanged = dsh("exec", "--", "echo RAN", home=home)
    assert unchanged.returncode == 126
    log = server.stop()
    assert log.count("booting the deployment again") == 4, log  # the fifth request found nothing moved
    assert log.count("the deployment did not boot again") == 1, log
    assert log.count("exec in session") == 5, "every request was served, none fell back to a cold exec"


def test_a_server_follows_its_deployment_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    deployment = home / "deployment.yaml"
    deployment.write_text("plugins:\n  - {id: tool-bash, config: {default_timeout: 111}}\n")
    deployment.chmod(0o600)
    running = Server(home)
    try:
        first = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)
        deployment.write_text("plugins:\n  - {id: tool-bash, config: {default_timeout: 222}}\n")
        second = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)
        assert (first["timeout"], second["timeout"]) == (111, 222)
    finally:
        log = running.stop()
    assert log.count("exec in session") == 2 and log.count("booting the deployment again") == 1, log


def test_served_hooks_start_from_the_clients_environment(server: Server, home: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    hooks = home / "hooks"
    hooks.mkdir(mode=0o700)
    guard = hooks / "claude.json"
    _guard(guard, f'env > "{seen}"')
    guard.chmod(0o600)
    outer = {"CLIENT_ONLY": "from-client", "CLAUDE_ENV_FILE": "/outer/env", "CODEX_THREAD_ID": "outer"}
    proc = dsh("exec", "--", "true", home=home, env=outer)
    assert proc.returncode == 0, proc.stderr
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert env["CLIENT_ONLY"] == "from-client", "the client's environment, not the server's"
    assert "CLAUDE_ENV_FILE" not in env and "CODEX_THREAD_ID" not in env, "no outer harness's identity"
    assert env["CLAUDE_CODE_SESSION_ID"] != "outer"
    assert "exec in session" in server.stop()
