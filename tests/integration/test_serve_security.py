"""`dsh serve` as an attacker and a careless client would meet it: other uids, bad frames, idle
connections, a thousand execs, and SIGTERM in the middle of a command."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.cli_fast._wire import MAX_FRAME, recv_frame, socket_path
from dsh.testing import OTHER_UID, as_other_uid, needs_root
from tests.helpers import dsh
from tests.integration.serve_support import (
    PARENT_PROBE,
    ServeProcess,
    as_a_user,
    ask,
    clean_env,
    connect,
    frame,
    group_alive,
    open_fds,
    request,
    rss_kib,
    session_lock_released_after_flush,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def server(home: Path) -> Iterator[ServeProcess]:
    running = ServeProcess(home, "--idle-timeout", "1")
    yield running
    running.stop()


def test_bad_requests_get_error_answers_and_the_server_stays_up(server: ServeProcess, tmp_path: Path) -> None:
    cases: dict[str, bytes | dict[str, object]] = {
        "exceeds the maximum of 8388608 bytes": (MAX_FRAME + 1).to_bytes(4, "big"),
        "not UTF-8 JSON": frame(b"{not json"),
        "a JSON object is expected, not list": frame(b"[1, 2]"),
        "a JSON object is expected, not int": frame(b"42"),
        "a JSON object is expected, not null": frame(b"null"),
        "'env' must be the client's non-empty environment": request("echo hi", tmp_path, env={}),
        "'env' must map strings to strings": request("echo hi", tmp_path, env={"A": 1}),  # type: ignore[dict-item]
        "'argv' must be a non-empty list of strings": request("x", tmp_path, argv=[]),
        "'cwd' must be an absolute path": request("true", Path("relative")),
        "speaks protocol 5, the client 4: run both from the same dsh": request("true", tmp_path, protocol=4),
    }
    for expected, message in cases.items():
        answer = ask(server.path, message)
        assert answer is not None and answer["ok"] is False, expected
        assert expected in answer["error"], (expected, answer)
    # Lines the server does not run are the client's to run (and to print help or a usage error for).
    unserved = {
        "help, a usage error": request(" ", tmp_path),
        "help, a usage error ": request("true", tmp_path, options=("--timeout", "-1")),
        " help, a usage error": request("true", tmp_path, options=("--help",)),
        "--debug and --no-server": request("true", tmp_path, options=("--debug",)),
        "serves the built-in deployment, not /elsewhere.yaml": request("x", tmp_path, deployment="/elsewhere.yaml"),
        "not `dsh exec`": {**request("true", tmp_path), "argv": ["env"]},
    }
    for expected, message in unserved.items():
        answer = ask(server.path, message)
        assert answer is not None and answer["ok"] is False and "error" not in answer, expected
        assert expected.strip() in answer["unserved"], (expected, answer)
    without_env = request("true", tmp_path)
    del without_env["env"]
    answer = ask(server.path, without_env)
    assert answer is not None and "'env' must be the client's non-empty environment" in answer["error"]

    # A large real environment (1 MB, far over the old 64 KiB limit) is served.
    big = {f"BIG_{i}": "x" * 100_000 for i in range(10)}
    answer = ask(server.path, request("env | grep -c ^BIG_", tmp_path, env={"PATH": os.environ["PATH"], **big}))
    assert answer is not None and answer["ok"], answer
    assert answer["result"]["stdout"] == "10\n"
    assert server.proc.poll() is None


def test_idle_and_half_open_connections_are_closed(server: ServeProcess, tmp_path: Path) -> None:
    held = [connect(server.path) for _ in range(50)]
    half = connect(server.path)
    half.sendall((100).to_bytes(4, "big") + b"{")
    for sock in [*held, half]:
        with sock:
            answer = recv_frame(sock)
            assert answer is not None and "no complete request within 1 s" in answer["error"]
            assert sock.recv(1) == b"", "closed after the answer"
    answer = ask(server.path, request("echo still up", tmp_path))
    assert answer is not None and answer["result"]["stdout"] == "still up\n"


def test_sigterm_mid_command_kills_flushes_answers_and_removes_the_socket(
    server: ServeProcess, home: Path, tmp_path: Path
) -> None:
    markers = [tmp_path / f"pgid-{i}" for i in range(2)]
    clients = [
        subprocess.Popen(
            [sys.executable, "-m", "dsh.cli", "exec", "--", f"echo $$ > {marker}; sleep 300"],
            env=clean_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for marker in markers
    ]
    for client, marker in zip(clients, markers, strict=True):
        while not marker.exists() or not marker.read_text().strip():
            assert client.poll() is None, client.communicate()
            time.sleep(0.05)
    idle = connect(server.path)  # sends nothing: must not hold up the stop
    groups = [int(marker.read_text()) for marker in markers]
    assert all(group_alive(pgid) for pgid in groups)
    code, log = server.stop(signal.SIGTERM)
    assert code == 0, log
    assert "stopped on SIGTERM" in log
    for client in clients:
        out, err = client.communicate(timeout=60)
        assert client.returncode == 128 + signal.SIGTERM, (out, err)
        assert err == (
            "dsh: dsh serve received SIGTERM while the command ran, and stopped\n"
            "dsh: interrupted by SIGTERM: a running command's process group was killed "
            "and the turn recorded as interrupted\n"
        )
    with idle, contextlib.suppress(ConnectionResetError):
        assert idle.recv(1) == b"", "an idle connection is closed, not kept until its timeout"
    assert not server.path.exists()
    assert not any(group_alive(pgid) for pgid in groups), "the commands' process groups were killed"
    listed = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    assert len(listed) == 2
    for session in listed:
        shown = json.loads(dsh("sessions", "show", session["id"], "--json", home=home).stdout)
        types = [e["type"] for e in shown["events"]]
        assert "tool/call" in types and types[-1] == "turn/end", types
        assert shown["events"][-1]["data"]["interrupted"] == "SIGTERM", "the server's signal, not 'cancelled'"


def _deployment(tmp_path: Path) -> Path:
    path = tmp_path / "deployment.yaml"
    path.write_text(
        "persistence: {backend: jsonl, config: {fsync: false}}\n"
        "plugins:\n"
        "  - {id: bash-local, name: bash-local}\n"
        "  - {id: bash-env, name: bash-env}\n"
        "  - {id: tool-bash, name: tool-bash}\n"
    )
    return path


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="needs root: dsh serve makes itself non-dumpable (seal_process), so only root can count its /proc/PID/fd",
)
def test_a_thousand_execs_keep_open_files_and_memory_flat(home: Path, tmp_path: Path) -> None:
    if not session_lock_released_after_flush(tmp_path):
        pytest.xfail("the JSONL backend keeps each session's lock until it closes; #9 makes it per turn")
    deployment = _deployment(tmp_path)
    server = ServeProcess(home, "--deployment", str(deployment))
    try:
        counts: dict[int, tuple[int, int]] = {}
        for n in range(1, 1001):
            answer = ask(server.path, request("true", tmp_path, deployment=str(deployment)))
            assert answer is not None and answer["ok"] and answer["result"]["exit_code"] == 0, answer
            if n in (100, 1000):
                counts[n] = (open_fds(server.pid), rss_kib(server.pid))
        (fds_100, rss_100), (fds_1000, rss_1000) = counts[100], counts[1000]
        assert fds_1000 <= fds_100, counts
        # 900 more execs may not add more than 2 KiB each (the leak this guards against was a file per exec).
        assert rss_1000 - rss_100 < 900 * 2, counts
    finally:
        server.stop()


def test_a_second_process_resumes_a_served_session(server: ServeProcess, home: Path, tmp_path: Path) -> None:
    answer = ask(server.path, request("echo first", tmp_path))
    assert answer is not None and answer["ok"], answer
    session_id = answer["result"]["session_id"]
    if not session_lock_released_after_flush(tmp_path):
        pytest.xfail("the JSONL backend keeps each session's lock until it closes; #9 makes it per turn")
    again = dsh("exec", "--no-server", "--session", session_id, "--", "echo $DSH_SESSION_ID", home=home)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == session_id


@needs_root
def test_a_server_of_another_uid_gets_nothing(home: Path, tmp_path: Path) -> None:
    """A socket at the right path, owned by us, but whose listener runs as another uid (SO_PEERCRED)."""
    path = Path(socket_path(None, {"DSH_HOME": str(home)}))
    home.mkdir(mode=0o700)
    path.parent.mkdir(mode=0o700)
    ready_r, ready_w = os.pipe()
    report_r, report_w = os.pipe()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))  # bound by us: the socket file is ours; the listener will not be
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            listener.listen(8)
            os.write(ready_w, b"x")
            received = 0
            while True:
                conn, _ = listener.accept()
                with conn:
                    data = b""
                    while chunk := conn.recv(65536):
                        data += chunk
                    if data == b"STOP":
                        break
                    received += len(data)
            os.write(report_w, str(received).encode())
            code = 0
        finally:
            os._exit(code)
    listener.close()
    assert os.read(ready_r, 1) == b"x"
    proc = dsh("exec", "--", "echo ran here", home=home, env={"GITHUB_TOKEN": "secret-token"})
    with connect(path) as stop:
        stop.sendall(b"STOP")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.read(report_r, 64) == b"0", "the fake server received nothing"
    assert proc.returncode == 0 and proc.stdout == "ran here\n", proc.stderr
    assert f"it runs as uid {OTHER_UID}, not as you (uid 0); running in this process" in proc.stderr


@needs_root
def test_a_socket_planted_by_another_uid_is_ignored(home: Path, tmp_path: Path) -> None:
    path = Path(socket_path(None, {"DSH_HOME": str(home)}))
    home.mkdir(mode=0o700)
    path.parent.mkdir(mode=0o700)
    planted = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    planted.bind(str(path))
    planted.listen(8)
    os.chown(path, OTHER_UID, OTHER_UID)
    try:
        proc = dsh("exec", "--", "echo ran here", home=home)
        assert proc.stdout == "ran here\n", proc.stderr
        assert f"ignoring {path}: not a socket owned by you" in proc.stderr
        planted.setblocking(False)
        with pytest.raises(BlockingIOError):
            planted.accept()  # the client never even connected
        # A run directory others can write is refused before any socket in it is looked at, and
        # the command stops there, in this process too (the README's threat model).
        os.chown(path, 0, 0)
        os.chmod(path.parent, 0o777)
        proc = dsh("exec", "--", "echo ran here", home=home)
        assert proc.returncode == 125 and proc.stdout == "", proc.stderr
        assert f"refusing dsh serve's run directory {path.parent}: it is writable by group or others" in proc.stderr
        assert f"dsh: refusing dsh run folder {path.parent}: it is writable by group or others" in proc.stderr
        assert f"run `chmod 700 {path.parent}`" in proc.stderr
    finally:
        planted.close()


@needs_root
def test_the_server_refuses_a_client_of_another_uid(server: ServeProcess, tmp_path: Path) -> None:
    # The other uid cannot reach our private run directory, so give it a hard link elsewhere.
    public = Path(tempfile.mkdtemp(dir=tmp_path.parent.parent.parent if tmp_path.is_relative_to("/tmp") else None))
    try:
        os.chmod(public, 0o755)
        link = public / "dsh.sock"
        os.link(server.path, link)
        os.chmod(link, 0o666)
        message = frame(json.dumps(request("touch /tmp/should-not-exist", tmp_path)).encode())
        answers_r, answers_w = os.pipe()

        def client() -> int:
            with connect(link) as sock:
                with contextlib.suppress(BrokenPipeError):  # refused before the request was read
                    sock.sendall(message)
                answer = recv_frame(sock)
            os.write(answers_w, json.dumps(answer).encode())
            return 0

        assert as_other_uid(client) == 0
        answer = json.loads(os.read(answers_r, 65536))
        assert answer == {"ok": False, "error": "this dsh server serves only uid 0"}
        answer = ask(server.path, request("echo still serving", tmp_path))
        assert answer is not None and answer["result"]["stdout"] == "still serving\n"
    finally:
        for child in public.iterdir():
            child.unlink()
        public.rmdir()
    _, log = server.stop()
    assert f"refused a client of uid {OTHER_UID}: only uid 0 is served" in log


def test_system_exit_from_plugin_code_fails_the_exec_not_the_server(home: Path, tmp_path: Path) -> None:
    deployment = tmp_path / "exiting.yaml"
    deployment.write_text(
        "plugins:\n"
        "  - {id: bash-local, enabled: false}\n"
        "  - {id: exiting, name: 'tests.integration.exiting_executor:plugin'}\n"
    )
    server = ServeProcess(home, "--deployment", str(deployment))
    try:
        for _ in range(2):
            answer = ask(server.path, request("echo hi", tmp_path, deployment=str(deployment)))
            assert answer == {"ok": False, "error": "the exec failed: SystemExit: 7"}
        assert server.proc.poll() is None
    finally:
        code, _ = server.stop()
    assert code == 0


def test_a_served_command_cannot_reach_other_clients_through_the_servers_proc(home: Path, tmp_path: Path) -> None:
    # Unsealed, a served command opened the server's fds (every client's connection among them)
    # through /proc/$PPID/fd and could answer another client in the server's name.
    probe = tmp_path / "probe.sh"
    probe.write_text(PARENT_PROBE)
    running = ServeProcess(home, prefix=as_a_user())
    try:
        answer = ask(running.path, request(f"bash {probe} $PPID", tmp_path))
    finally:
        running.stop()
    assert answer is not None and answer["ok"] and answer["result"]["stdout"] == "probed\n", answer
