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

from dsh.bash_ssh.testing import REMOTE_ONLY, TemporaryHost
from tests.helpers import dsh

pytestmark = [
    pytest.mark.integration,
    pytest.mark.system_parts("openssh-server", "bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the test sshd runs as a privileged daemon: needs root"),
]


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


def test_dsh_env_says_what_the_host_gets_for_a_session(host: TemporaryHost, tmp_path: Path) -> None:
    home = tmp_path / "h"
    deployment = _deployment(tmp_path, host)
    made = json.loads(
        dsh("exec", "--json", "--deployment", str(deployment), "--cwd", str(host.home), "--", "true", home=home).stdout
    )
    out = json.loads(
        dsh("env", "--json", "--deployment", str(deployment), "--session", made["session_id"], home=home).stdout
    )
    rows = {r["key"]: r for r in out["variables"]}
    label = f"host {host.user}@127.0.0.1:{host.port}"
    assert out["world"] == {"kind": "remote", "label": label}
    assert rows["DSH_SESSION_JSONL"]["passes"] is False and rows["DSH_SESSION_JSONL"]["why"] == (
        f"{made['location']['path']} is on this machine, not on {label} (no shared mount declares it)"
    )
    assert rows["DSH_HOME"]["passes"] is False and rows["DSH_DEPLOYMENT"]["passes"] is False
    assert rows["DSH_SESSION_ID"] == {**rows["DSH_SESSION_ID"], "passes": True, "value": made["session_id"]}


def test_hooks_run_on_the_harness_machine_with_its_paths(host: TemporaryHost, tmp_path: Path) -> None:
    seen = tmp_path / "hook"
    hook = f"id -u > {seen}.uid; cat > {seen}.json"
    extra = (
        "  - id: hooks\n    name: hooks\n    config:\n      claude:\n        hooks:\n          PreToolUse:\n"
        f"            - hooks: [{{type: command, command: {json.dumps(hook)}}}]\n"
    )
    deployment = _deployment(tmp_path, host)
    deployment.write_text(deployment.read_text() + extra)
    home = tmp_path / "h"
    done = dsh("exec", "--json", "--deployment", str(deployment), "--cwd", str(host.home), "--", "id -u", home=home)
    out = json.loads(done.stdout)
    assert out["stdout"] != "0\n" and out["exit_code"] == 0, out  # the command ran as the host's user
    assert Path(f"{seen}.uid").read_text() == f"{os.getuid()}\n", "the hook ran here, as the harness's user"
    payload = json.loads(Path(f"{seen}.json").read_text())
    view = home / "transcripts" / "claude-code" / f"{out['session_id']}.jsonl"  # the harness's own file
    assert payload["transcript_path"] == str(view) and payload["cwd"] == str(host.home)


def test_a_session_works_in_a_folder_only_the_host_has(host: TemporaryHost, tmp_path: Path) -> None:
    assert not REMOTE_ONLY.exists(), "the folder is the host's alone"
    home = tmp_path / "h"
    deployment = str(_deployment(tmp_path, host))
    made = json.loads(
        dsh("exec", "--json", "--deployment", deployment, "--cwd", str(REMOTE_ONLY), "--", "pwd", home=home).stdout
    )
    assert made["exit_code"] == 0 and made["stdout"] == f"{REMOTE_ONLY}\n", made
    again = dsh("exec", "--json", "--deployment", deployment, "--session", made["session_id"], "--", "pwd", home=home)
    assert json.loads(again.stdout)["stdout"] == f"{REMOTE_ONLY}\n", again.stderr


QUIET = {"PYTHONWARNINGS": "ignore"}
"""cryptography's deprecation warnings on asyncssh's import are not this file's subject (fixed elsewhere)."""


def _exec_until_running(tmp_path: Path, deployment: Path, tag: str, *flags: str) -> subprocess.Popen[str]:
    """``dsh exec`` of a command that prints to both streams, then sleeps on the host; returned once it sleeps."""
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "dsh.cli", "exec", *flags, "--deployment", str(deployment),
            "--", f"echo printed; echo complained >&2; sleep {tag}",
        ],
        env={**os.environ, **QUIET, "DSH_HOME": str(tmp_path / "h")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    return proc


def _wait_for(host: TemporaryHost, tag: str) -> None:
    deadline = time.monotonic() + 30
    while not host.pids(f"sleep\0{tag}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host.pids(f"sleep\0{tag}"), "the command never started"
    time.sleep(0.3)  # what it printed is on its way


def _recorded_result(path: str) -> dict[str, object]:
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    (result,) = [line["data"]["data"] for line in lines if line.get("type") == "tool/result"]
    return result  # type: ignore[no-any-return]


def test_a_host_killed_mid_command_keeps_what_ran_records_an_unknown_status_and_exits_255(
    host: TemporaryHost, tmp_path: Path
) -> None:
    deployment = _deployment(tmp_path, host)
    try:
        proc = _exec_until_running(tmp_path, deployment, "4247.5", "--json")
        _wait_for(host, "4247.5")
        host.kill()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 255, err  # it ran: never 125 ("nothing ran"), which a caller would retry
        assert err == ""
        document = json.loads(out)
        assert (document["exit_code"], document["status_known"], document["error"]) == (255, False, None)
        assert document["stdout"] == "printed\n"
        kept, note = document["stderr"].splitlines()
        assert kept == "complained"
        assert note.startswith(f"dsh: the connection to {host.user}@127.0.0.1:{host.port} was lost while the ")
        recorded = _recorded_result(document["location"]["path"])
        assert recorded["status_known"] is False and recorded["exit_code"] == 255
        assert recorded["stdout"] == "printed\n" and recorded["stderr"] == document["stderr"]
        # Without --json: the output as it came, and the one line after the command's stderr.
        host.start()
        proc = _exec_until_running(tmp_path, deployment, "4248.5")
        _wait_for(host, "4248.5")
        host.kill()
        out, err = proc.communicate(timeout=60)
        assert (proc.returncode, out) == (255, "printed\n"), err
        assert err.splitlines()[0] == "complained" and len(err.splitlines()) == 2, err
        assert "its exit status is unknown" in err.splitlines()[1]
    finally:
        host.kill()
        host.start()


def test_a_frozen_link_ends_the_call_within_the_configured_keepalive_bound(host: TemporaryHost, tmp_path: Path) -> None:
    deployment = _deployment(tmp_path, host, "      keepalive_interval: 0.5\n      keepalive_count_max: 2\n")
    tag = "4249.5"
    proc = _exec_until_running(tmp_path, deployment, tag, "--json")
    try:
        _wait_for(host, tag)
        host.freeze()
        frozen = time.monotonic()
        out, err = proc.communicate(timeout=60)
        waited = time.monotonic() - frozen
    finally:
        host.thaw()
        for pid in host.pids(f"sleep\0{tag}"):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 255, err
    assert waited >= 1.0 and waited < 1.5 + 8, f"gave up after {waited:.2f} s"  # the bound, not a speed
    document = json.loads(out)
    assert (document["stdout"], document["status_known"]) == ("printed\n", False)
    assert "the host sent nothing for 1.5 s (keepalive_interval, keepalive_count_max)" in document["stderr"]


def test_an_identity_file_with_a_passphrase_runs_nothing_and_names_the_file_and_field(
    host: TemporaryHost, tmp_path: Path
) -> None:
    key = tmp_path / "locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "words", "-f", str(key)], check=True)
    deployment = _deployment(tmp_path, host)
    deployment.write_text(deployment.read_text().replace(str(host.identity_file), str(key)))
    marker = host.home / "ran-with-a-locked-key"
    done = dsh("exec", "--deployment", str(deployment), "--", f"touch {marker}", home=tmp_path / "h", env=QUIET)
    assert done.returncode == 125 and not marker.exists()
    assert done.stderr == (
        f"dsh: identity_file {key} of the bash-ssh config for {host.user}@127.0.0.1:{host.port} cannot be used: "
        "it is protected by a passphrase, which dsh cannot ask for (no ssh-agent is consulted); "
        "use a key without one for this host\n"
    )
