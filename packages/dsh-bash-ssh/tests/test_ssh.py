"""The SSH executor against a real OpenSSH sshd on a loopback port (``dsh.bash_ssh.testing``)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, ExecError, declare_harness_identity
from dsh.bash_ssh import SshError, SshExecutor
from dsh.bash_ssh.testing import TemporaryHost

pytestmark = [
    pytest.mark.system_parts("openssh-server", "bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the test sshd runs as a privileged daemon: needs root"),
]

STALE = "DSH_SESSION_ID=stale\nDSH_HOME=/stale\nFOO_TOKEN=leak\nHOST_GREETING=hello\nCODEX_THREAD_ID=host-thread\n"


@pytest.fixture(scope="module")
def host() -> Iterator[TemporaryHost]:
    """One host for the module: /etc/environment and ~/.bashrc set stale DSH_* values and a credential."""
    server = TemporaryHost(
        environment=STALE,
        bashrc=(
            "export DSH_SESSION_ID=stale dsh_turn_id=stale MY_SECRET=leak CLAUDE_ENV_FILE=/host/env\n"
            # exported functions the prelude's bash and the command's would import: one stands in for
            # the builtin that removes the rest, one for a command the child runs
            "unset() { :; }; printenv() { echo hijacked; }; export -f unset printenv\n"
            "echo bashrc-noise\necho err-noise >&2\n"
        ),
    )
    server.setup()
    try:
        yield server
    finally:
        server.cleanup()


def _executor(host: TemporaryHost, tmp_path: Path, **kwargs: object) -> SshExecutor:
    options: dict[str, object] = {
        "port": host.port,
        "user": host.user,
        "identity_file": host.identity_file,
        "known_hosts": host.known_hosts,
        "spill_dir": tmp_path / "spill",
        **kwargs,
    }
    return SshExecutor(host.host, **options)  # type: ignore[arg-type]


def _run(executor: SshExecutor, request: BashExecRequest) -> object:
    async def main() -> object:
        try:
            return await executor.run(request)
        finally:
            await executor.close()

    return asyncio.run(main())


def test_the_childs_dsh_variables_are_exactly_the_snapshot_whatever_the_login_sets(
    host: TemporaryHost, tmp_path: Path
) -> None:
    snapshot = {"DSH_SESSION_ID": "fresh", "DSH_SHELL": "1", "DSH_TOOL_CALL_ID": "c-1"}
    # A peer harness's identity variables, as a loaded hook dialect declares them.
    undeclare = declare_harness_identity(["CODEX_THREAD_ID", "CLAUDE_ENV_FILE"])
    try:
        result = _run(
            _executor(host, tmp_path),
            BashExecRequest("env", cwd=str(host.home), env={"ORDINARY": "yes"}, dsh_env=snapshot),
        )
    finally:
        undeclare()
    assert result.exit_code == 0, result  # type: ignore[attr-defined]
    stdout: str = result.stdout  # type: ignore[attr-defined]
    child = dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)
    assert {k: v for k, v in child.items() if k.upper().startswith("DSH_")} == snapshot
    assert "FOO_TOKEN" not in child and "MY_SECRET" not in child
    assert "CODEX_THREAD_ID" not in child and "CLAUDE_ENV_FILE" not in child  # a harness's identity on the host
    assert not [k for k in child if k.startswith("BASH_FUNC_")], "no function of the host's login reaches it"
    greeting = _run(_executor(host, tmp_path), BashExecRequest("printenv HOST_GREETING", cwd=str(host.home)))
    assert greeting.stdout == "hello\n"  # type: ignore[attr-defined]
    assert child["HOST_GREETING"] == "hello" and child["ORDINARY"] == "yes" and child["TERM"] == "dumb"
    assert "bashrc-noise" not in stdout and "err-noise" not in result.stderr  # type: ignore[attr-defined]
    assert child["PWD"] == str(host.home)


def test_statuses_output_and_input_are_the_local_executors(host: TemporaryHost, tmp_path: Path) -> None:
    executor = _executor(host, tmp_path, max_output=100)

    async def main() -> None:
        try:
            assert (await executor.run(BashExecRequest("exit 7"))).exit_code == 7
            assert (await executor.run(BashExecRequest("kill -TERM $$"))).exit_code == 143
            echoed = await executor.run(BashExecRequest("cat; echo done >&2", stdin="given\n"))
            assert echoed.stdout == "given\n" and echoed.stderr == "done\n"
            long = await executor.run(BashExecRequest("seq 1 20000"))
            assert long.stdout_spill is not None and long.stdout.endswith("19999\n20000\n")
            assert Path(long.stdout_spill).read_text() == "".join(f"{n}\n" for n in range(1, 20001))
        finally:
            await executor.close()

    asyncio.run(main())


def test_a_missing_working_directory_runs_nothing(host: TemporaryHost, tmp_path: Path) -> None:
    with pytest.raises(ExecError, match=f"working directory /no/such does not exist on {host.user}@127.0.0.1"):
        _run(_executor(host, tmp_path), BashExecRequest("echo ran", cwd="/no/such"))


def test_a_timeout_kills_the_remote_process_group_and_keeps_the_output(host: TemporaryHost, tmp_path: Path) -> None:
    tag = "4242.125"
    started = time.monotonic()
    result = _run(_executor(host, tmp_path), BashExecRequest(f"echo before; sleep {tag} & sleep {tag}", timeout=1))
    assert result.exit_code == 124 and result.timed_out and result.stdout == "before\n"  # type: ignore[attr-defined]
    assert time.monotonic() - started < 6
    deadline = time.monotonic() + 3
    while host.pids(f"sleep\0{tag}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host.pids(f"sleep\0{tag}") == []


def test_a_cancelled_call_kills_the_remote_process_group(host: TemporaryHost, tmp_path: Path) -> None:
    tag = "4243.125"
    executor = _executor(host, tmp_path)

    async def main() -> None:
        task = asyncio.ensure_future(executor.run(BashExecRequest(f"sleep {tag}")))
        deadline = time.monotonic() + 10
        while not host.pids(f"sleep\0{tag}") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert host.pids(f"sleep\0{tag}")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await executor.close()

    asyncio.run(main())
    assert host.pids(f"sleep\0{tag}") == []


def test_sixteen_concurrent_calls_share_a_pool(host: TemporaryHost, tmp_path: Path) -> None:
    executor = _executor(host, tmp_path)

    async def main() -> tuple[list[str], int, float]:
        try:
            started = time.monotonic()
            results = await asyncio.gather(
                *(
                    executor.run(BashExecRequest("sleep 1; echo $DSH_TOOL_CALL_ID", dsh_env={"DSH_TOOL_CALL_ID": c}))
                    for c in (f"c{i}" for i in range(16))
                )
            )
            return [r.stdout for r in results], executor.connections, time.monotonic() - started
        finally:
            await executor.close()

    outputs, connections, took = asyncio.run(main())
    assert outputs == [f"c{i}\n" for i in range(16)]
    assert connections == 2  # ten sessions on one connection (OpenSSH's MaxSessions), six on a second
    assert took < 8


def test_an_unknown_or_changed_host_key_is_refused(host: TemporaryHost, tmp_path: Path) -> None:
    marker = host.home / "ran-with-a-changed-key"
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(SshError, match=r"^refused dshremote@127\.0\.0\.1:\d+: its host key is not the one in"):
        _run(_executor(host, tmp_path, known_hosts=empty), BashExecRequest(f"touch {marker}"))
    host.kill()
    host.change_host_key()
    host.start()
    try:
        with pytest.raises(SshError) as caught:
            _run(_executor(host, tmp_path), BashExecRequest(f"touch {marker}"))
        assert "ssh-keygen -R" in str(caught.value) and len(str(caught.value).splitlines()) == 1
        assert not marker.exists()
    finally:
        host.kill()
        host.rekey()
        host.start()


def test_a_missing_known_hosts_file_is_refused(host: TemporaryHost, tmp_path: Path) -> None:
    with pytest.raises(SshError, match=r"known_hosts file .* does not exist"):
        _run(_executor(host, tmp_path, known_hosts=tmp_path / "none"), BashExecRequest("true"))


def test_an_unreachable_host_is_one_line(host: TemporaryHost, tmp_path: Path) -> None:
    executor = _executor(host, tmp_path, port=1, connect_timeout=5)
    with pytest.raises(SshError) as caught:
        _run(executor, BashExecRequest("true"))
    assert str(caught.value).startswith(f"cannot reach ssh host {host.user}@127.0.0.1:1: ")
    assert len(str(caught.value).splitlines()) == 1


def test_sshd_killed_mid_command_keeps_the_output_with_an_unknown_status_and_the_next_call_reconnects(
    host: TemporaryHost, tmp_path: Path
) -> None:
    executor = _executor(host, tmp_path)

    async def main() -> None:
        try:
            first = await executor.run(BashExecRequest("echo warm"))
            assert first.stdout == "warm\n" and executor.connections == 1
            task = asyncio.ensure_future(
                executor.run(BashExecRequest("echo started; echo to-stderr >&2; sleep 4244.5"))
            )
            deadline = time.monotonic() + 10
            while not host.pids("sleep\x004244.5") and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # the two lines are on their way
            host.kill()
            result = await asyncio.wait_for(task, 30)
            # It ran (and had effects): never "nothing ran", never a status of its own, every byte kept.
            assert (result.exit_code, result.status_known, result.timed_out) == (255, False, False)
            assert result.stdout == "started\n"
            assert result.as_data()["status_known"] is False
            kept, note = result.stderr.splitlines()
            assert kept == "to-stderr"
            assert note.startswith(f"dsh: the connection to {host.user}@127.0.0.1:{host.port} was lost while the ")
            assert "its exit status is unknown and it may still be running there, so dsh reports 255" in note
            # The remote side notices the lost session a moment after the client does.
            deadline = time.monotonic() + 10
            while host.pids("sleep\x004244.5") and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert host.pids("sleep\x004244.5") == []
            with pytest.raises(SshError, match="cannot reach ssh host"):
                await executor.run(BashExecRequest("echo down"))
            host.start()
            again = await executor.run(BashExecRequest("echo back"))
            assert again.stdout == "back\n" and again.exit_code == 0 and again.status_known
        finally:
            await executor.close()

    asyncio.run(main())


def test_a_frozen_link_is_given_up_after_the_keepalive_bound_keeping_what_came(
    host: TemporaryHost, tmp_path: Path
) -> None:
    tag = "4246.5"
    executor = _executor(host, tmp_path, keepalive_interval=0.5, keepalive_count_max=2)
    assert executor.silence_bound == 1.5
    command = f"echo started; for i in 1 2 3; do echo tick $i; done; sleep {tag}"

    async def main() -> tuple[object, float]:
        try:
            task = asyncio.ensure_future(executor.run(BashExecRequest(command, timeout=600)))
            deadline = time.monotonic() + 10
            while not host.pids(f"sleep\0{tag}") and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            host.freeze()
            frozen = time.monotonic()
            result = await asyncio.wait_for(task, 30)
            return result, time.monotonic() - frozen
        finally:
            host.thaw()
            await executor.close()

    try:
        result, waited = asyncio.run(main())
    finally:
        for pid in host.pids(f"sleep\0{tag}"):
            os.kill(pid, signal.SIGKILL)
    assert waited >= 1.0 and waited < 1.5 + 5, f"given up after {waited:.2f} s"  # the bound, not a speed
    assert (result.exit_code, result.status_known) == (255, False)  # type: ignore[attr-defined]
    assert result.stdout == "started\ntick 1\ntick 2\ntick 3\n"  # type: ignore[attr-defined]
    assert result.stderr == (  # type: ignore[attr-defined]
        f"dsh: the connection to {host.user}@127.0.0.1:{host.port} was lost while the command ran (no answer "
        "to 2 keep-alives: the host sent nothing for 1.5 s (keepalive_interval, keepalive_count_max)); its exit "
        "status is unknown and it may still be running there, so dsh reports 255 with the output received "
        "until then (check the host; the next call reconnects)\n"
    )


def test_a_timeout_whose_kill_cannot_reach_a_frozen_host_is_an_unknown_status_not_124(
    host: TemporaryHost, tmp_path: Path
) -> None:
    tag = "4250.5"
    executor = _executor(host, tmp_path)  # keep-alives far off: the timeout comes first

    async def main() -> object:
        try:
            task = asyncio.ensure_future(executor.run(BashExecRequest(f"echo started; sleep {tag}", timeout=2)))
            deadline = time.monotonic() + 10
            while not host.pids(f"sleep\0{tag}") and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            host.freeze()
            return await asyncio.wait_for(task, 30)
        finally:
            host.thaw()
            await executor.close()

    try:
        result = asyncio.run(main())
        assert host.pids(f"sleep\0{tag}"), "the kill never reached the host: the command runs on"
    finally:
        for pid in host.pids(f"sleep\0{tag}"):
            os.kill(pid, signal.SIGKILL)
    assert (result.exit_code, result.status_known, result.timed_out) == (255, False, False)  # type: ignore[attr-defined]
    assert result.stdout == "started\n"  # type: ignore[attr-defined]
    assert "was lost after the command timed out (the kill could not reach the host)" in result.stderr  # type: ignore[attr-defined]


def _key(tmp_path: Path, name: str, *, passphrase: str = "") -> Path:
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(key)], check=True)
    return key


def _unusable_keys(tmp_path: Path) -> list[tuple[Path, str]]:
    missing = tmp_path / "no-such-key"
    locked = _key(tmp_path, "locked", passphrase="secret words")
    text = tmp_path / "not-a-key"
    text.write_text("hello\n")
    text.chmod(0o600)
    shared = _key(tmp_path, "shared")
    shared.chmod(0o644)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    return [
        (missing, "it does not exist; set identity_file to your private key's path"),
        (locked, "it is protected by a passphrase, which dsh cannot ask for (no ssh-agent is consulted); "
         "use a key without one for this host"),
        (text, "it is not a private key asyncssh can read ("),
        (shared, f"its mode 0644 lets others read or change it; make it private (chmod 600 {shared})"),
        (folder, "it is not a file; set identity_file to your private key's path"),
    ]  # fmt: skip


def test_an_unusable_identity_file_is_one_line_naming_the_file_the_field_and_why(
    host: TemporaryHost, tmp_path: Path
) -> None:
    marker = host.home / "ran-with-a-bad-key"
    for key, why in _unusable_keys(tmp_path):
        with pytest.raises(SshError) as caught:
            _run(_executor(host, tmp_path, identity_file=key), BashExecRequest(f"touch {marker}"))
        message = str(caught.value)
        assert message.startswith(
            f"identity_file {key} of the bash-ssh config for {host.user}@127.0.0.1:{host.port} cannot be used: {why}"
        ), message
        assert len(message.splitlines()) == 1 and "sshd" not in message, message
    assert not marker.exists()


def test_the_world_is_the_host(host: TemporaryHost, tmp_path: Path) -> None:
    world = _executor(host, tmp_path, dsh_home="/srv/dsh", shared=["/shared/sessions"]).world
    assert world.kind == "remote" and world.home == "/srv/dsh"
    assert world.why_not("/shared/sessions/a.jsonl") is None
    assert world.why_not("/root/.dsh") == (
        f"/root/.dsh is on this machine, not on host {host.user}@127.0.0.1:{host.port} (no shared mount declares it)"
    )
