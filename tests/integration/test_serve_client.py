"""The served ``dsh exec`` client against a real ``dsh serve``: signals, exact bytes, the connection's
end states, and what the client imports."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.cli_fast._wire import recv_frame, socket_path
from tests.conftest import REPO
from tests.helpers import dsh
from tests.integration.serve_support import (
    ServeProcess,
    answer_of,
    ask,
    clean_env,
    connect,
    frame,
    group_alive,
    request,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def server(home: Path) -> Iterator[ServeProcess]:
    running = ServeProcess(home)
    yield running
    running.stop()


def _wait_for(path: Path, proc: subprocess.Popen[bytes] | None = None) -> int:
    for _ in range(600):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the client ended early ({proc.returncode}): {proc.communicate()}")
        time.sleep(0.02)
    pytest.fail(f"{path} never appeared")


def _wait_gone(pgid: int) -> None:
    for _ in range(200):
        if not group_alive(pgid):
            return
        time.sleep(0.05)
    pytest.fail(f"process group {pgid} outlived its turn")


def _only_events(home: Path) -> list[dict[str, object]]:
    (session,) = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    shown = dsh("sessions", "show", session["id"], "--json", home=home)
    events: list[dict[str, object]] = json.loads(shown.stdout)["events"]
    return events


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGALRM]
)
def test_a_signal_to_the_client_is_forwarded_killed_recorded_and_reported_as_in_process(
    server: ServeProcess, home: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    pidfile = tmp_path / "pid"
    client = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "exec", "--", f"sleep 300 & echo $$ > {pidfile}; wait"],
        env=clean_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pgid = _wait_for(pidfile, client)
    client.send_signal(sig)
    out, err = client.communicate(timeout=60)
    assert client.returncode == 128 + sig.value, err
    # The very line the in-process `dsh exec` prints (test_durability), and no traceback.
    assert err.decode() == (
        f"dsh: interrupted by {sig.name}: a running command's process group was killed "
        "and the turn recorded as interrupted\n"
    )
    assert out == b""
    _wait_gone(pgid)
    events = _only_events(home)
    assert [e["type"] for e in events] == ["turn/start", "tool/call", "tool/result", "turn/end"]
    assert events[-1]["data"]["interrupted"] == sig.name  # type: ignore[index]
    assert events[2]["data"]["is_error"] is True  # type: ignore[index]
    _, log = server.stop()
    assert f"interrupted by {sig.name}" in log and "exited" not in log, "the turn was interrupted, never completed"


def test_undecodable_environment_and_argv_bytes_reach_the_command_exactly(
    server: ServeProcess, home: Path, tmp_path: Path
) -> None:
    env = {os.fsencode(k): os.fsencode(v) for k, v in clean_env(home).items()}
    env[b"WEIRD"] = b"caf\xe9\xff"
    hexdump = b"printf %s \"$WEIRD\" | od -An -tx1; printf %s '\xfe\x80' | od -An -tx1"
    served = subprocess.run(
        [sys.executable.encode(), b"-m", b"dsh.cli", b"exec", b"--json", b"--", hexdump],
        env=env,  # type: ignore[arg-type]  # bytes keys and values: POSIX takes them as they are
        capture_output=True,
        check=False,
    )
    assert served.returncode == 0, served.stderr
    document = json.loads(served.stdout)
    assert document["stdout"].split() == ["63", "61", "66", "e9", "ff", "fe", "80"]
    argv = subprocess.run(
        [sys.executable.encode(), b"-m", b"dsh.cli", b"exec", b"--", b"printf", b"%s", b"\xfe\x80"],
        env=env,  # type: ignore[arg-type]
        capture_output=True,
        check=False,
    )
    assert argv.returncode == 0, argv.stderr
    assert argv.stdout == "\ufffd\ufffd".encode(), "several words: the exact bytes, decoded with replacement as always"
    _, log = server.stop()
    assert log.count("exited 0") == 2, f"both were served, not run in the client: {log}"


def test_a_half_closed_request_is_answered(server: ServeProcess, tmp_path: Path) -> None:
    with connect(server.path) as sock:
        sock.sendall(frame(json.dumps(request("sleep 0.3; echo answered", tmp_path)).encode()))
        sock.shutdown(socket.SHUT_WR)  # as `nc -N` does: the request is complete, the answer awaited
        answer = answer_of(sock)
    assert answer is not None and answer["ok"], answer
    assert answer["result"]["stdout"] == "answered\n"


@pytest.mark.parametrize(
    ("trailing", "why"),
    [
        (b"garbage!", "exceeds the maximum"),
        (frame(b'{"interrupt": "SIGKILL"}'), 'only {"interrupt": "SIGINT"|"SIGTERM"|...} may follow'),
        (b"ab", "2 stray bytes followed the request"),
    ],
)
def test_bytes_after_the_request_stop_the_command_and_get_an_error_answer(
    server: ServeProcess, tmp_path: Path, trailing: bytes, why: str
) -> None:
    pidfile = tmp_path / "pid"
    with connect(server.path) as sock:
        sock.sendall(frame(json.dumps(request(f"echo $$ > {pidfile}; sleep 300", tmp_path)).encode()))
        pgid = _wait_for(pidfile)
        sock.sendall(trailing)
        if trailing == b"ab":
            sock.shutdown(socket.SHUT_WR)  # two bytes of a header, then nothing more
        answer = answer_of(sock)
    assert answer is not None and answer["ok"] is False, answer
    assert why in answer["error"] and "process group was killed" in answer["error"], answer
    _wait_gone(pgid)


def test_a_client_that_goes_away_has_its_command_killed(server: ServeProcess, home: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    sock = connect(server.path)
    sock.sendall(frame(json.dumps(request(f"echo $$ > {pidfile}; sleep 300", tmp_path)).encode()))
    pgid = _wait_for(pidfile)
    sock.shutdown(socket.SHUT_WR)  # half-closed: still waiting for the answer, so the command goes on
    time.sleep(0.6)
    assert group_alive(pgid)
    sock.close()  # now gone entirely
    _wait_gone(pgid)
    assert _only_events(home)[-1]["data"]["interrupted"] == "the client went away"  # type: ignore[index]
    answer = ask(server.path, request("echo still serving", tmp_path))
    assert answer is not None and answer["result"]["stdout"] == "still serving\n"


def test_the_served_client_imports_only_what_it_needs(server: ServeProcess, home: Path) -> None:
    probe = (
        "import sys\n"
        "from dsh.cli_fast._client import main\n"
        "code = main(['exec', '--json', '--', 'true'])\n"
        "sys.stdout.flush()\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=clean_env(home), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["exit_code"] == 0, proc.stderr
    loaded = set(proc.stderr.split())
    heavy = {"argparse", "json", "re", "pathlib", "hashlib", "shlex", "socket", "enum", "typing", "asyncio", "logging"}
    heavy |= {"pydantic", "yaml", "importlib.metadata", "dsh.core", "dsh.loader", "dsh.cli._cli"}
    assert not loaded & heavy, f"the served client imported {sorted(loaded & heavy)}"
    _, log = server.stop()
    assert "exited 0" in log, "it was served"


class _OlderServer(threading.Thread):
    """A stand-in for a ``dsh serve`` of an earlier release: it refuses every request, unread, as such a
    server refuses another protocol's (before any keep-alive: nothing is taken)."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen()
        self.refused = 0

    def run(self) -> None:
        refusal = json.dumps({"ok": False, "error": "this dsh server speaks protocol 4, the client 5: restart it"})
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                header = conn.recv(4, socket.MSG_WAITALL)
                body = conn.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL)
                assert json.loads(body)["protocol"] == 5
                conn.sendall(frame(refusal.encode()))
                self.refused += 1


def test_a_line_no_server_runs_runs_here_when_an_older_server_refuses_it(home: Path, tmp_path: Path) -> None:
    """A refusal before the request was taken is about serving; ``--debug`` and another deployment's line never
    asked to be served, so they run in this process (a line the server would run is still refused, 125)."""
    older = _OlderServer(socket_path(None, clean_env(home)))
    older.start()
    try:
        debug = dsh("exec", "--debug", "--", "echo ran", home=home)
        assert debug.returncode == 0 and debug.stdout == "ran\n", debug.stderr
        assert "refused the request (this dsh server speaks protocol 4" in debug.stderr
        assert "it does not run this line: running it here" in debug.stderr
        other = tmp_path / "other.yaml"
        other.write_text("plugins: []\n")
        # Sent unread to the server of the deployment its environment names, which would never run it.
        elsewhere = dsh("exec", "--deployment", str(other), "--", "echo ran", home=home)
        assert elsewhere.returncode == 0 and elsewhere.stdout == "ran\n", elsewhere.stderr
        assert "running it here" in elsewhere.stderr and older.refused == 2
        served = dsh("exec", "--", "echo ran", home=home)
        assert served.returncode == 125 and "ran" not in served.stdout
        assert "speaks protocol 4" in served.stderr and "running it here" not in served.stderr
        assert older.refused == 3
    finally:
        older.listener.close()


def test_the_installed_dsh_script_adds_no_import_to_the_served_client(server: ServeProcess, home: Path) -> None:
    """The ``dsh`` script is dsh-cli's own file (``scripts/dsh``): an installer's generated wrapper imports ``re``
    (with ``enum`` and ``functools``), a fifth of a served ``dsh exec`` (benchmarks README)."""
    script = Path(sys.executable).parent / "dsh"
    ours = (REPO / "packages" / "dsh-cli" / "scripts" / "dsh").read_text()
    assert script.read_text().splitlines()[1:] == ours.splitlines()[1:], "the installed script is ours, shebang aside"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), "exec", "--", "true"],
        env=clean_env(home),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "dsh.cli_fast._served" in imported, proc.stderr
    assert not imported & {"re", "enum", "typing", "argparse", "pathlib"}, sorted(imported)
    _, log = server.stop()
    assert "exited 0" in log, "it was served"


def test_served_failures_before_the_run_print_the_in_process_json_document(server: ServeProcess, home: Path) -> None:
    served = dsh("exec", "--json", "--session", "nope", "--", "true", home=home)
    local = dsh("exec", "--json", "--no-server", "--session", "nope", "--", "true", home=home)
    assert served.returncode == local.returncode == 125
    assert served.stdout == local.stdout and json.loads(served.stdout)["error"].startswith("no session nope")
    assert served.stderr == local.stderr
    _, log = server.stop()
    assert "exec in session" not in log


def test_a_reader_that_went_away_ends_a_served_exec_quietly_with_141(server: ServeProcess, home: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `dsh exec -- ... | true` once `true` has exited
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "dsh.cli", "exec", "--", "echo hi"],
            env=clean_env(home),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")
    _, log = server.stop()
    assert "exited 0" in log, "it was served"


def test_a_served_exec_with_stdout_closed_still_prints_the_command_s_stderr(server: ServeProcess, home: Path) -> None:
    code = "import os, subprocess, sys; os.close(1); sys.exit(subprocess.call(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "dsh.cli", "exec", "--", "echo out; echo ERR >&2"],
        env=clean_env(home),
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (125, "ERR\ndsh: cannot write the output: stdout is closed\n")
    _, log = server.stop()
    assert "exited 0" in log, "it was served"


def test_a_server_whose_log_reader_went_away_still_runs_and_answers(home: Path, tmp_path: Path) -> None:
    # Its log line for the request failed (EPIPE) and the client was told the command never ran,
    # though it had run and was recorded.
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "serve"], env=clean_env(home), stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        while not proc.stderr.readline().startswith("dsh serve: listening on "):
            assert proc.poll() is None, "dsh serve exited before listening"
        proc.stderr.close()  # the reader of its log is gone
        done = dsh("exec", "--json", "--", "echo OUTPUT", home=home)
        assert done.returncode == 0, done.stdout + done.stderr
        answer = json.loads(done.stdout)
        assert (answer["exit_code"], answer["stdout"], answer["error"]) == (0, "OUTPUT\n", None)
        assert proc.poll() is None, "the server is still serving"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_served_json_document_stays_json_where_the_client_s_encoding_is_ascii(
    server: ServeProcess, home: Path
) -> None:
    done = dsh("exec", "--json", "--", "printf 'caf\\303\\251\\n'", home=home, env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii() and json.loads(done.stdout)["stdout"] == "café\n"
    _, log = server.stop()
    assert "exited 0" in log, "it was served"


def _served_count(server: ServeProcess) -> int:
    _, log = server.stop()
    return log.count("dsh serve: exec in session")


@pytest.mark.parametrize(
    "line",
    [
        ("--timeout", "0", "--", "true"),
        ("--cwd", "/tmp", "--session", "s1", "--", "true"),
        ("--",),
        ("--json", "--bogus", "--", "true"),
        ("--help",),
    ],
    ids=["bad-timeout", "cwd-with-session", "no-command", "unknown-option", "help"],
)
def test_a_served_client_prints_help_and_usage_errors_exactly_as_a_cold_one(
    server: ServeProcess, home: Path, line: tuple[str, ...]
) -> None:
    """The server reads the line with the one parser and hands back what it will not run; the
    client's own process prints it, so status 2 (0 for help), stderr and stdout are the cold ones."""
    served = dsh("exec", *line, home=home)
    cold = dsh("exec", "--no-server", *line, home=home)
    assert served.returncode == (0 if "--help" in line else 2), served.stderr
    assert (served.returncode, served.stdout, served.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert _served_count(server) == 0


def test_a_served_json_exec_reports_its_document_and_its_timeout(server: ServeProcess, home: Path) -> None:
    served = dsh("exec", "--json", "--timeout", "0.5", "--", "echo out; sleep 5", home=home)
    assert served.returncode == 124, served.stderr
    document = json.loads(served.stdout)
    assert (document["stdout"], document["timed_out"], document["timeout"]) == ("out\n", True, 0.5)
    assert "timed out after 0.5 s" in served.stderr
    assert _served_count(server) == 1


def test_no_server_spelled_out_never_asks_a_hung_server(server: ServeProcess, home: Path) -> None:
    os.kill(server.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        local = dsh("exec", "--no-server", "--json", "--", "echo here", home=home, timeout=60)
        assert time.monotonic() - started < 8, "it waited for the stopped server"
        assert local.returncode == 0 and json.loads(local.stdout)["stdout"] == "here\n", local.stderr
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert _served_count(server) == 0


def test_a_line_for_another_deployment_or_with_debug_runs_in_the_client(
    server: ServeProcess, home: Path, tmp_path: Path
) -> None:
    """The server answers that such a line is not its own; the client reads it and runs it itself
    (or through that deployment's own server). Relative paths are the client's."""
    other = tmp_path / "work" / "other.yaml"
    other.parent.mkdir()
    other.write_text("persistence: {backend: jsonl}\n")
    other.chmod(0o600)
    elsewhere = dsh("exec", "--deployment", "other.yaml", "--", "pwd", home=home, cwd=other.parent)
    assert (elsewhere.returncode, elsewhere.stdout) == (0, f"{other.parent}\n"), elsewhere.stderr
    debug = dsh("exec", "--debug", "--", "echo debugged", home=home)
    assert (debug.returncode, debug.stdout) == (0, "debugged\n"), debug.stderr
    here = dsh("exec", "--cwd", "..", "--", "pwd", home=home, cwd=other.parent)
    assert (here.returncode, here.stdout) == (0, f"{tmp_path}\n"), here.stderr
    assert _served_count(server) == 1, "only the last line was served"


def test_a_stopped_server_holds_no_line_it_would_not_run(server: ServeProcess, home: Path, tmp_path: Path) -> None:
    """A server that never acknowledges is waited for (CONNECT_TIMEOUT), but a line it would not have run
    (help, a usage error, --debug, another deployment) then runs as in-process, never as "may have started"."""
    os.kill(server.pid, signal.SIGSTOP)
    try:
        debug = dsh("exec", "--debug", "--", "echo debugged", home=home, timeout=60)
        usage = dsh("exec", "--timeout", "0", "--json", "--", "true", home=home, timeout=60)
        cold_usage = dsh("exec", "--no-server", "--timeout", "0", "--json", "--", "true", home=home, timeout=60)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert (debug.returncode, debug.stdout) == (0, "debugged\n"), debug.stderr
    assert "may have started" not in debug.stderr and "does not run this line" in debug.stderr
    assert (usage.returncode, usage.stdout) == (cold_usage.returncode, cold_usage.stdout) == (2, "")
    assert usage.stderr.endswith(cold_usage.stderr) and "may have started" not in usage.stderr
    assert _served_count(server) == 0


def test_a_line_of_many_options_is_read_by_its_own_client_not_by_the_server(
    server: ServeProcess, home: Path, tmp_path: Path
) -> None:
    """argparse's time grows with the square of a line's options: the server reads none past 64 words before
    ``--``, so one client's line cannot hold another client's command (it ended 255, its output lost)."""
    victim = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli_fast", "exec", "--", "sleep 2; echo victim"],
        env=clean_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    many = dsh("exec", *(["--json"] * 5000), "--", "echo many", home=home, timeout=120)
    out, err = victim.communicate(timeout=60)
    assert (victim.returncode, out) == (0, "victim\n"), err
    assert many.returncode == 0 and json.loads(many.stdout)["stdout"] == "many\n", many.stderr
    assert _served_count(server) == 1, "only the victim's line was served"


@pytest.mark.parametrize("value", ["", "missing/..", "afile/.."], ids=["empty", "missing-parent", "file-parent"])
def test_a_served_cwd_is_judged_as_the_in_process_one(
    server: ServeProcess, home: Path, tmp_path: Path, value: str
) -> None:
    (tmp_path / "afile").write_text("")
    served = dsh("exec", "--cwd", value, "--", "pwd", home=home, cwd=tmp_path)
    cold = dsh("exec", "--no-server", "--cwd", value, "--", "pwd", home=home, cwd=tmp_path)
    assert served.returncode == cold.returncode == 125, (served.stderr, cold.stderr)
    assert served.stdout == cold.stdout == "" and "is not a directory" in served.stderr


def test_a_deleted_working_directory_is_dsh_s_own_failure_served_or_not(
    server: ServeProcess, home: Path, tmp_path: Path
) -> None:
    """Status 125 and the --json document, as for any failure before the command runs (it was 1, with a
    line saying stdout could not be written, wherever a server listened or not)."""
    gone = tmp_path / "gone"
    code = f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); from dsh.cli_fast import run; run()"
    for extra in ((), ("--no-server",)):
        gone.mkdir()
        proc = subprocess.run(
            [sys.executable, "-c", code, "exec", *extra, "--json", "--", "true"],
            env=clean_env(home),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 125, (extra, proc.stderr)
        assert json.loads(proc.stdout)["exit_code"] is None, proc.stdout


def test_python_m_dsh_cli_fast_serves_without_the_cli_package(server: ServeProcess, home: Path) -> None:
    """The light ``python -m`` form (``python -m dsh.cli`` imports the package and its exports first)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dsh.cli_fast", "exec", "--", "echo fast"],
        env=clean_env(home),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, "fast\n"), proc.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "dsh.cli_fast._served" in imported and "dsh.cli" not in imported, sorted(imported)
    assert all(line.startswith("import time:") for line in proc.stderr.splitlines()), "nothing else on stderr"
    assert _served_count(server) == 1


def test_an_older_server_refuses_a_newer_client_in_one_line_and_json_still_gets_its_document(tmp_path: Path) -> None:
    """A server of another protocol answers before it read the line, so it never says whether ``--json``
    was given: the client reads its own line with the one parser to print the failure document."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True, mode=0o700)
    os.chmod(home, 0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path(None, {"DSH_HOME": str(home)}))
    listener.listen(1)
    said = "this dsh server speaks protocol 4, the client 5"

    def old_server() -> None:
        conn, _ = listener.accept()
        with conn:
            recv_frame(conn)
            conn.sendall(frame(json.dumps({"ok": False, "error": said}).encode()))

    thread = threading.Thread(target=old_server, daemon=True)
    thread.start()
    try:
        done = dsh("exec", "--json", "--", "true", home=home, env={"DSH_DEPLOYMENT": ""})
    finally:
        thread.join(timeout=30)
        listener.close()
    assert (done.returncode, done.stderr) == (125, f"dsh: {said}\n")
    document = json.loads(done.stdout)
    assert (document["error"], document["exit_code"], document["status_known"]) == (said, None, True)
