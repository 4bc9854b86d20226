"""Signals at the edges of a ``dsh exec``: while dsh starts up, after the command ended, and with a
served exec whose server does not answer. Real processes, real signals, real sockets."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dsh.cli_fast._wire import MISSED_KEEPALIVES, frame, recv_frame, socket_path
from tests.helpers import dsh, make_dist
from tests.integration.serve_support import ServeProcess, ask, clean_env, request

pytestmark = pytest.mark.integration

SLOW_PLUGIN = """
import os, time
with open(os.environ["SLOW_MARKER"], "w") as marker:
    marker.write("importing\\n")
time.sleep(60)
C = None
"""


def _client(*args: str, home: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", *args],
        env=clean_env(home, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_until(ready: object, proc: subprocess.Popen[str], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        if proc.poll() is not None:
            pytest.fail(f"dsh ended ({proc.returncode}) before {what}: {proc.communicate()}")
        time.sleep(0.02)
    pytest.fail(f"never saw {what}")


def _events(home: Path) -> list[dict[str, object]]:
    listed = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    events: list[dict[str, object]] = []
    for session in listed:
        shown = dsh("sessions", "show", session["id"], "--json", home=home)
        events.extend(json.loads(shown.stdout)["events"])
    return events


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_dsh_starts_up_stops_it_at_once_and_nothing_runs(tmp_path: Path, sig: signal.Signals) -> None:
    site, home, marker, ran = tmp_path / "site", tmp_path / "home", tmp_path / "importing", tmp_path / "ran"
    make_dist(site, "slow-env", "1.0", {"dsh.bash_env": {"slow": "slowmod:C"}}, {"slowmod": SLOW_PLUGIN})
    proc = _client(
        "exec", "--no-server", "--", f"echo ran > {ran}", home=home, PYTHONPATH=str(site), SLOW_MARKER=str(marker)
    )
    _wait_until(marker.exists, proc, "the slow plugin's import")
    sent = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 15, "dsh waited for the plugin's 60 s import to end"
    assert proc.returncode == 128 + sig.value, err
    assert err == f"dsh: interrupted by {sig.name} before any command started: nothing ran\n"
    assert out == ""
    assert not ran.exists()
    assert not any("process group was killed" in json.dumps(e) for e in _events(home))


RUDE_PLUGIN = """
import signal
signal.signal(signal.SIGINT, signal.SIG_DFL)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
class C:
    name = "rude"
    variables = {"DSH_RUDE": "resets dsh's signal handlers at import"}
    def resolve(self, execution):
        return {}
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_plugin_that_resets_dshs_signal_handlers_cannot_orphan_the_command(
    tmp_path: Path, sig: signal.Signals
) -> None:
    site, home, pid_file = tmp_path / "site", tmp_path / "home", tmp_path / "shell.pid"
    make_dist(site, "rude-env", "1.0", {"dsh.bash_env": {"rude": "rudemod:C"}}, {"rudemod": RUDE_PLUGIN})
    proc = _client("exec", "--no-server", "--", f"echo $$ > {pid_file}; sleep 30", home=home, PYTHONPATH=str(site))
    _wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), proc, "the command's start")
    shell = int(pid_file.read_text())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    try:
        assert proc.returncode == 128 + sig.value, err
        assert f"plugin code replaced dsh's {sig.name} handler while dsh loaded; dsh put its own back" in err
        assert "process group was killed" in err
        end = time.monotonic() + 5
        while _alive(shell) and time.monotonic() < end:
            time.sleep(0.02)
        assert not _alive(shell), "the command outlived dsh"
    finally:
        if _alive(shell):
            os.killpg(shell, signal.SIGKILL)


ASKING_PLUGIN = """
import os
from dsh.bash import BashExecRequest, LocalExecutor
class C:
    name = "asking"
    variables = {"DSH_ASKING": "what the shell said at load"}
    def __init__(self, value):
        self.value = value
    def resolve(self, execution):
        return {"DSH_ASKING": self.value}
def make():
    # A factory that asks the shell once at load, through dsh's own executor (inside containment).
    result = LocalExecutor().run_sync(BashExecRequest(command=f"touch {os.environ['ASKING_MARKER']}; sleep 30"))
    return C(result.stdout.strip())
"""


def test_ctrl_c_while_a_contributor_runs_a_command_at_load_stops_dsh_and_blames_nobody(tmp_path: Path) -> None:
    # dsh's handler is wrapped by dsh-loader's containment watch while plugin code runs: the executor's
    # check that its handlers are in force must not take that wrapper for a plugin's own handler.
    site, home, marker = tmp_path / "site", tmp_path / "home", tmp_path / "asking"
    make_dist(site, "asking-env", "1.0", {"dsh.bash_env": {"asking": "askingmod:make"}}, {"askingmod": ASKING_PLUGIN})
    proc = _client("exec", "--no-server", "--", "echo ran", home=home, PYTHONPATH=str(site), ASKING_MARKER=str(marker))
    _wait_until(marker.exists, proc, "the contributor's command at load")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out == ""
    assert "plugin code replaced" not in err
    assert "failed" not in err and "Interrupted" not in err, err
    assert not (home / "sessions").exists() or not any((home / "sessions").rglob("*.jsonl"))


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGINT])
def test_a_signal_the_caller_ignores_stays_ignored(tmp_path: Path, sig: signal.Signals) -> None:
    # `nohup dsh exec -- job` (SIGHUP), a script's `dsh exec ... &` (SIGINT): the run goes on.
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "exec", "--no-server", "--", f"touch {started}; sleep 1; echo survived"],
        env=clean_env(tmp_path / "home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(sig, signal.SIG_IGN),  # what nohup does before it execs
    )
    _wait_until(started.exists, proc, "the command's start")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (0, "survived\n", "")


def test_nohup_dsh_serve_outlives_the_terminal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "serve"],
        env=clean_env(home),
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),  # what nohup does before it execs
    )
    try:
        assert server.stderr is not None and server.stderr.readline().startswith("dsh serve: listening on ")
        server.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert server.poll() is None, "dsh serve stopped on a SIGHUP its caller ignores"
        assert dsh("exec", "--", "echo served", home=home).stdout == "served\n"
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=30)
    assert server.returncode == 0 and "Traceback" not in err, err


def test_an_early_ctrl_c_never_prints_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # The console script's own two lines, with "go" said once `run` has taken over Ctrl-C and is about
    # to load the verb: the sweep covers the imports of dsh's verbs (where Ctrl-C used to print a
    # traceback), not Python's own start-up or the launch line before `run` (out of dsh's reach).
    launch = (
        "import os, sys; import dsh.cli_fast._client as c; verb = c._main\n"
        "c._main = lambda words: (os.write(2, b'go\\n'), verb(words))[1]\n"
        "sys.exit(c.run())"
    )
    seen: set[int] = set()
    for delay in (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12):
        proc = subprocess.Popen(
            [sys.executable, "-c", launch, "exec", "--no-server", "--", "true"],
            env=clean_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None and proc.stderr.readline() == "go\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
        assert proc.returncode in (0, 130), (delay, proc.returncode, err)
        if proc.returncode == 130:
            assert err.count("\n") == 1 and err.startswith("dsh: interrupted by SIGINT"), (delay, err)
        seen.add(proc.returncode)
    assert 130 in seen, "no SIGINT of the sweep came while dsh ran"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_as_dsh_exits_keeps_the_status(tmp_path: Path, sig: signal.Signals) -> None:
    # The signal comes in run()'s last flush, after the verb returned: not "nothing ran", not a death
    # by the signal, but the command's own status and one line.
    launch = (
        "import os, sys, time; import dsh.cli_fast._client as c\n"
        "class Out:\n"
        "    def __init__(self, real): self.real = real\n"
        "    def write(self, text): return self.real.write(text)\n"
        f"    def flush(self): self.real.flush(); os.kill(os.getpid(), {sig.value}); time.sleep(2)\n"
        "sys.stdout = Out(sys.stdout)\n"
        "sys.exit(c.run())"
    )
    done = subprocess.run(
        [sys.executable, "-c", launch, "exec", "--no-server", "--", "echo ran; exit 3"],
        env=clean_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done
    assert done.stdout == "ran\n"
    # Each flush sends one: the exec verb's own flush (its Interrupts say so), then run()'s.
    assert done.stderr.endswith(f"dsh: {sig.name} came as dsh was exiting; exit status 3 stands\n"), done.stderr
    assert "nothing ran" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_still_ends_dsh_while_its_exit_waits_for_a_plugins_thread(tmp_path: Path, sig: signal.Signals) -> None:
    # A plugin left a non-daemon thread: the interpreter waits for it after the verb returned. The
    # user's Ctrl-C (or a closed terminal) must still end dsh, with the command's status.
    launch = (
        "import sys, threading, time\n"
        "threading.Thread(target=time.sleep, args=(30,)).start()\n"
        "import dsh.cli_fast._client as c\n"
        "sys.exit(c.run())"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", launch, "exec", "--no-server", "--", "echo ran; exit 3"],
        env=clean_env(tmp_path / "home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ran\n"
    time.sleep(0.5)  # the verb is done; the exit waits for the thread
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 3, err
    # One line: this one, or (on a slow machine, the verb not yet returned) the exec verb's own.
    assert err in (
        f"dsh: {sig.name} came as dsh was exiting; exit status 3 stands\n",
        f"dsh: {sig.name} came after the command had ended: its turn was recorded as it ran, "
        "and dsh exits with the command's status\n",
    ), err


def test_a_signal_after_the_command_ended_keeps_its_status_and_record(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # More output than the (shrunk) pipe holds: dsh blocks writing it, after the turn was flushed,
    # until we read.
    proc = _client("exec", "--no-server", "--", "head -c 20000 /dev/zero | tr '\\0' x; exit 3", home=home)
    assert proc.stdout is not None
    fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)

    def flushed() -> bool:
        return any("turn/end" in p.read_text() for p in (home / "sessions").rglob("*.jsonl"))

    _wait_until(flushed, proc, "the turn's flush")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert out == "x" * 20000
    assert "process group was killed" not in err
    assert err.endswith(
        "dsh: SIGTERM came after the command had ended: its turn was recorded as it ran, "
        "and dsh exits with the command's status\n"
    )
    (end,) = [e for e in _events(home) if e["type"] == "turn/end"]
    assert "interrupted" not in end["data"]  # type: ignore[operator]


class FakeServer:
    """A listener at a deployment's socket path that reads one request, then does what the test says."""

    def __init__(self, home: Path, answer: dict[str, object] | None) -> None:
        run = home / "run"
        run.mkdir(parents=True, mode=0o700)
        os.chmod(home, 0o700)
        self.path = socket_path(None, {"DSH_HOME": str(home)})
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.answer = answer
        self.got_request = threading.Event()
        self.interrupt: dict[str, object] | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.settimeout(60)
            recv_frame(conn)
            self.got_request.set()
            self.interrupt = recv_frame(conn)  # the forwarded signal
            if self.answer is None:
                time.sleep(30)  # hung: never answers
            else:
                conn.sendall(frame(json.dumps(self.answer).encode()))

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def fake_home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_a_served_exec_whose_server_does_not_answer_ends_after_a_short_grace(fake_home: Path) -> None:
    server = FakeServer(fake_home, answer=None)
    try:
        proc = _client("exec", "--", "echo x", home=fake_home)
        _wait_until(server.got_request.is_set, proc, "the request at the server")
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        assert time.monotonic() - sent < 10
        assert proc.returncode == 130, err
        assert server.interrupt == {"interrupt": "SIGINT"}
        assert err == (
            f"dsh: interrupted by SIGINT, but the dsh server at {server.path} (pid {os.getpid()}) did not answer "
            "within 2 s: the command may still be running under it (stop that server)\n"
        )
        assert out == ""
    finally:
        server.close()


def test_a_served_exec_signalled_after_its_command_ended_keeps_the_status(fake_home: Path) -> None:
    result = {"stdout": "done\n", "stderr": "", "exit_code": 3, "timed_out": False, "timeout": None, "error": None}
    server = FakeServer(fake_home, answer={"ok": True, "result": result})
    try:
        proc = _client("exec", "--", "echo done; exit 3", home=fake_home)
        _wait_until(server.got_request.is_set, proc, "the request at the server")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert server.interrupt == {"interrupt": "SIGTERM"}
        assert proc.returncode == 3, err
        assert out == "done\n"
        assert err == (
            "dsh: SIGTERM came after the command had ended: its turn was recorded as it ran, "
            "and dsh exits with the command's status\n"
        )
    finally:
        server.close()


def test_a_stopped_server_does_not_keep_ctrl_c_from_ending_a_served_exec(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = ServeProcess(home)
    try:
        os.kill(server.pid, signal.SIGSTOP)
        proc = _client("exec", "--", "echo x", home=home)
        time.sleep(1.0)  # connected and sent (the stopped server's backlog and buffer take it) or not yet
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - sent < 10
        assert proc.returncode == 130, err
        assert err.count("\n") == 1 and "interrupted by SIGINT" in err
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.stop()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[" * 200_000 + b"]" * 200_000, {"ok": False, "error": "malformed request: JSON nested too deeply"}),
        # a timeout too large for a float is the parser's usage error, which the client prints itself
        (None, {"ok": False, "unserved": "the line is help, a usage error or not `dsh exec`: the client prints it"}),
    ],
)
def test_absurd_requests_get_an_error_answer_and_no_traceback(
    tmp_path: Path, body: bytes | None, why: dict[str, object]
) -> None:
    server = ServeProcess(tmp_path / "home")
    try:
        absurd = request("true", tmp_path, options=("--timeout", "1" + "0" * 400))
        raw = body if body is not None else json.dumps(absurd).encode()
        answer = ask(server.path, frame(raw))
        assert answer == why
        assert ask(server.path, request("echo still serving", tmp_path))["ok"]  # type: ignore[index]
    finally:
        _, log = server.stop()
    assert "Traceback" not in log, log


KEEPALIVE = 0.5
"""The test servers' ``--keepalive``: their clients give up after ``MISSED_KEEPALIVES`` times this in silence."""

SLACK = 8.0
"""Seconds a loaded test machine may add to a bound (process start-up, scheduling)."""


def _command_started(proc: subprocess.Popen[str], pidfile: Path) -> int:
    _wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), proc, "the command's start")
    return int(pidfile.read_text())


@pytest.mark.parametrize(
    ("timeout", "sleep"),
    [
        ((), 300),  # no --timeout: only the server's keep-alives bound the wait
        (("--timeout", "5"), 2),  # the command ends within its timeout, but the stopped server never says so
    ],
)
def test_a_server_stopped_mid_command_lets_its_client_return_within_the_keepalive_bound(
    tmp_path: Path, timeout: tuple[str, ...], sleep: int
) -> None:
    # No signal to the client: a stopped server sends no keep-alive, so the client gives up after
    # MISSED_KEEPALIVES of them, long before a --timeout plus its grace would end the wait.
    home, pidfile = tmp_path / "home", tmp_path / "pid"
    server = ServeProcess(home, "--keepalive", str(KEEPALIVE))
    bound = MISSED_KEEPALIVES * KEEPALIVE
    pgid = None
    try:
        proc = _client("exec", "--json", *timeout, "--", f"echo $$ > {pidfile}; sleep {sleep}", home=home)
        pgid = _command_started(proc, pidfile)
        os.kill(server.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        out, err = proc.communicate(timeout=60)
        waited = time.monotonic() - stopped
        assert bound - KEEPALIVE <= waited < bound + SLACK, f"the client gave up after {waited:.2f} s"
        assert proc.returncode == 255, err
        assert err == (
            f"dsh: the dsh server at {server.path} (pid {server.pid}) is stopped (resume it with kill -CONT "
            f"{server.pid}) and sent no keep-alive for {bound:g} s: the command may have started and may still "
            "be running under it, and its turn may not be recorded; how it ended is unknown\n"
        )
        document = json.loads(out)
        assert document["exit_code"] is None and "may still be running" in document["error"]
        assert document["status_known"] is False
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.stop()
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


def test_a_command_longer_than_many_keepalive_bounds_is_waited_for(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = ServeProcess(home, "--keepalive", "0.2")  # the client's bound: 0.6 s of silence
    try:
        proc = _client("exec", "--", "sleep 3; echo done", home=home)
        out, err = proc.communicate(timeout=60)
        assert (proc.returncode, out, err) == (0, "done\n", "")
    finally:
        _, log = server.stop()
    assert "exited 0" in log, "it was served"


def test_a_server_killed_mid_command_never_tells_its_client_nothing_ran(tmp_path: Path) -> None:
    home, pidfile = tmp_path / "home", tmp_path / "pid"
    server = ServeProcess(home, "--keepalive", str(KEEPALIVE))
    pgid = None
    try:
        proc = _client("exec", "--json", "--", f"echo $$ > {pidfile}; sleep 300", home=home)
        pgid = _command_started(proc, pidfile)
        os.kill(server.pid, signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=60)
        assert time.monotonic() - killed < MISSED_KEEPALIVES * KEEPALIVE + SLACK
        assert proc.returncode == 255, err
        assert err == (
            f"dsh: the dsh server at {server.path} (pid {server.pid}) closed the connection without answering "
            "(it was killed or crashed): the command may have started and may still be running under it, "
            "and its turn may not be recorded; how it ended is unknown\n"
        )
        assert "nothing ran" not in out
        document = json.loads(out)
        assert document["exit_code"] is None and "may still be running" in document["error"]
    finally:
        server.stop()
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


def test_containment_watches_every_signal_that_interrupts_a_run() -> None:
    # A signal dsh turns into an interruption must never pass for a plugin's own failure while
    # plugin code runs. There is one list (dsh.paths.INTERRUPTS): the served client reads it,
    # dsh's interrupt handling takes it, and containment wraps the handlers of every one of them.
    from dsh.cli_fast import _status
    from dsh.loader import containment
    from dsh.paths import INTERRUPTS, signals

    assert _status.INTERRUPTS is signals.INTERRUPTS is INTERRUPTS

    def handler(signum: int, frame: object) -> None:
        raise AssertionError("no signal is sent")

    saved = signals.take(signals.interrupt_signals(), handler)
    try:
        with containment():
            assert signals.watched()
            wrapped = [signum for signum in saved if signals.current(signum) is not handler]
        assert wrapped == list(saved) == list(signals.interrupt_signals())
        assert all(signals.current(signum) is handler for signum in saved) and not signals.watched()
    finally:
        signals.restore(saved)
