"""``dsh exec`` and ``dsh run`` under faults: real processes, real signals, real files."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh.tool_bash import ShellToolConfig
from tests.helpers import dsh

pytestmark = pytest.mark.integration


def _popen(*args: str, home: Path, cwd: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "DSH_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()).endswith("\n"):
            return text
        if proc.poll() is not None:
            pytest.fail(f"dsh ended early ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.02)
    pytest.fail(f"{path} never appeared")


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


def _assert_gone(pgid: int) -> None:
    for _ in range(100):
        if not _group_members(pgid):
            return
        time.sleep(0.05)
    pytest.fail(f"process group {pgid} outlived dsh: {_group_members(pgid)}")


def _events(home: Path, session_id: str) -> list[dict[str, object]]:
    shown = dsh("sessions", "show", session_id, "--json", home=home)
    assert shown.returncode == 0, shown.stderr
    events: list[dict[str, object]] = json.loads(shown.stdout)["events"]
    return events


def _only_session(home: Path) -> str:
    (session,) = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    return str(session["id"])


@pytest.mark.parametrize(
    "sig",
    [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM],
)
def test_a_signal_to_dsh_exec_kills_the_group_flushes_the_turn_and_exits_128_plus_n(
    tmp_path: Path, sig: signal.Signals
) -> None:
    home, pidfile = tmp_path / "home", tmp_path / "pid"
    proc = _popen("exec", "--no-server", "--", f"sleep 300 & echo $$ > {pidfile}; wait", home=home)
    pgid = int(_wait_for(pidfile, proc))
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig.value, err
    assert err == (
        f"dsh: interrupted by {sig.name}: a running command's process group was killed "
        "and the turn recorded as interrupted\n"
    )
    _assert_gone(pgid)
    session_id = _only_session(home)
    events = _events(home, session_id)
    assert [e["type"] for e in events] == ["turn/start", "tool/call", "tool/result", "turn/end"]
    assert events[-1]["data"]["interrupted"] == sig.name  # type: ignore[index]
    assert events[2]["data"]["is_error"] is True  # type: ignore[index]
    # The lock went with the turn: the session resumes at once.
    again = dsh("exec", "--session", session_id, "--", "echo $DSH_SESSION_ID", home=home)
    assert again.returncode == 0 and again.stdout == f"{session_id}\n", again.stderr
    starts = [e["data"]["turn_id"] for e in _events(home, session_id) if e["type"] == "turn/start"]  # type: ignore[index]
    assert starts == [f"{session_id}:turn-1", f"{session_id}:turn-2"]


def test_a_signal_to_dsh_exec_with_hooks_under_asyncio_also_kills_and_flushes(tmp_path: Path) -> None:
    # A configured hook runs the turn under asyncio (the default one runs without an event loop):
    # the same signal contract holds on that path.
    home, pidfile = tmp_path / "home", tmp_path / "pid"
    (home / "hooks").mkdir(parents=True)
    hook = {"type": "command", "command": "cat > /dev/null"}
    (home / "hooks" / "claude.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    proc = _popen("exec", "--no-server", "--", f"sleep 300 & echo $$ > {pidfile}; wait", home=home)
    pgid = int(_wait_for(pidfile, proc))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.endswith(
        "dsh: interrupted by SIGTERM: a running command's process group was killed "
        "and the turn recorded as interrupted\n"
    )
    _assert_gone(pgid)
    events = _events(home, _only_session(home))
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["interrupted"] == "SIGTERM"  # type: ignore[index]


def test_a_signal_to_dsh_run_flushes_the_turn_as_interrupted(tmp_path: Path) -> None:
    home, pidfile = tmp_path / "home", tmp_path / "pid"
    script = tmp_path / "script.json"
    steps = [{"tool_calls": [{"name": "bash", "arguments": {"command": f"echo $$ > {pidfile}; sleep 300"}}]}]
    script.write_text(json.dumps({"turns": [{"user": "go", "steps": steps}]}))
    proc = _popen("run", "--script", str(script), home=home)
    pgid = int(_wait_for(pidfile, proc))
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    _assert_gone(pgid)
    events = _events(home, _only_session(home))
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["interrupted"] == "SIGTERM"  # type: ignore[index]


def test_a_locked_session_is_refused_before_the_command_runs(tmp_path: Path) -> None:
    home, started, marker = tmp_path / "home", tmp_path / "started", tmp_path / "marker"
    first = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)
    session_id = first["session_id"]
    holder = _popen("exec", "--no-server", "--session", session_id, "--", f"echo > {started}; sleep 300", home=home)
    try:
        _wait_for(started, holder)
        proc = dsh("exec", "--session", session_id, "--", f"touch {marker}", home=home)
        assert proc.returncode == 125
        assert proc.stderr == (
            f"dsh: session {session_id} is being written by process {holder.pid} "
            f"(lock {first['location']['path']}.lock); wait until that writer lets it go (a dsh exec when its turn "
            "ends; a dsh mcp connection, a dsh run or an open harness session when it closes) or use another session\n"
        )
        assert not marker.exists()
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.communicate(timeout=30)


@pytest.mark.parametrize("writers", [2, 20])
def test_concurrent_dsh_exec_resumers_never_share_a_turn_id(tmp_path: Path, writers: int) -> None:
    home = tmp_path / "home"
    session_id = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)["session_id"]
    procs = [
        _popen("exec", "--no-server", "--session", session_id, "--", f"touch {tmp_path}/ran-{i}", home=home)
        for i in range(writers)
    ]
    codes = [p.wait(timeout=120) for p in procs]
    errors = [p.stderr.read() if p.stderr else "" for p in procs]
    ran = sorted(tmp_path.glob("ran-*"))
    assert set(codes) <= {0, 125} and codes.count(0) == len(ran) >= 1, errors
    assert all("is being written by" in e for c, e in zip(codes, errors, strict=True) if c == 125), errors
    starts = [e["data"]["turn_id"] for e in _events(home, session_id) if e["type"] == "turn/start"]  # type: ignore[index]
    assert len(starts) == 1 + len(ran) and len(set(starts)) == len(starts)


def test_an_unwritable_home_is_refused_before_the_command_runs(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    home = tmp_path / "home"
    home.write_text("a file, not a directory\n")
    proc = dsh("exec", "--", f"touch {marker}", home=home)
    assert proc.returncode == 125
    assert proc.stderr == (
        f"dsh: cannot create DSH_HOME {home}: {home} is not a directory; move it aside or use another path\n"
    )
    assert not marker.exists()


def test_a_damaged_transcript_is_refused_before_the_command_runs(tmp_path: Path) -> None:
    home, marker = tmp_path / "home", tmp_path / "marker"
    made = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)
    path = Path(made["location"]["path"])
    path.write_bytes(b"garbage\n")
    proc = dsh("exec", "--session", made["session_id"], "--", f"touch {marker}", home=home)
    assert proc.returncode == 125 and not marker.exists()
    assert proc.stderr == (
        f"dsh: {path}: line 1 is not a valid session header (it is not JSON); the transcript is damaged\n"
    )
    shown = dsh("sessions", "show", made["session_id"], home=home)
    assert shown.returncode == 1 and shown.stderr.count("\n") == 1
    assert path.read_bytes() == b"garbage\n"


def test_recording_failure_after_the_command_ran_keeps_output_and_exits_125(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # The command pulls the session's directory away, so its first flush cannot be written.
    command = 'd=$(dirname "$DSH_SESSION_JSONL"); rm -rf "$d"; touch "$d"; echo ran; exit 3'
    proc = dsh("exec", "--", command, home=home)
    assert proc.returncode == 125
    assert proc.stdout == "ran\n"
    assert proc.stderr.startswith("dsh: the command ran, but the transcript of session ")
    assert "could not be saved: cannot open" in proc.stderr and proc.stderr.count("\n") == 1
    as_json = dsh("exec", "--json", "--", command, home=tmp_path / "home2")
    out = json.loads(as_json.stdout)
    assert as_json.returncode == 125
    assert out["exit_code"] == 3 and out["stdout"] == "ran\n" and "could not be saved" in out["error"]


def test_a_timeout_keeps_partial_output_shows_it_records_it_and_exits_124(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = dsh("exec", "--timeout", "1", "--", "echo before; sleep 30; echo after", home=home)
    assert proc.returncode == 124
    assert proc.stdout == "before\n"
    assert proc.stderr == (
        "dsh: the command timed out after 1 s and its process group was killed; allow longer with --timeout SECONDS\n"
    )
    result = next(e for e in _events(home, _only_session(home)) if e["type"] == "tool/result")
    data = result["data"]["data"]  # type: ignore[index]
    assert data["stdout"] == "before\n" and data["timed_out"] is True and data["exit_code"] == 124
    out = json.loads(dsh("exec", "--json", "--timeout", "0.5", "--", "echo partial; sleep 30", home=home).stdout)
    assert out["timed_out"] is True and out["exit_code"] == 124 and out["stdout"] == "partial\n"
    assert out["timeout"] == 0.5 and out["error"] is None


def test_signal_statuses_and_timeout_validation(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert dsh("exec", "--", "kill -TERM $$", home=home).returncode == 128 + signal.SIGTERM
    for bad in ("0", "-1", "nan", "inf", "soon"):
        proc = dsh("exec", "--timeout", bad, "--", "true", home=home)
        assert proc.returncode == 2 and "must be a positive number of seconds" in proc.stderr
    over = dsh("exec", "--timeout", "601", "--", f"touch {tmp_path}/marker", home=home)
    assert over.returncode == 125 and not (tmp_path / "marker").exists()
    assert (
        over.stderr
        == "dsh: --timeout 601 is over the bash tool's limit of 600 s (max_timeout of tool-bash in the deployment)\n"
    )
    barely = dsh("exec", "--timeout", "600.0000001", "--", f"touch {tmp_path}/marker", home=home)
    assert (barely.returncode, barely.stderr.split(" (")[0]) == (
        125,
        "dsh: --timeout 600.0000001 is over the bash tool's limit of 600 s",  # not "600 is over 600"
    )
    empty = dsh("exec", "--session", "", "--", f"touch {tmp_path}/marker", home=home)
    assert empty.returncode == 125 and empty.stderr == "dsh: session id is empty\n"
    assert not (tmp_path / "marker").exists()


def test_exec_help_states_exit_statuses_and_the_tools_default_timeout(tmp_path: Path) -> None:
    text = dsh("exec", "--help", home=tmp_path).stdout
    config = ShellToolConfig()
    flat = " ".join(text.split())
    assert f"default {config.default_timeout:g} s" in flat and f"at most {config.max_timeout:g} s" in flat
    for status in ("124", "125", "126", "128+N"):
        assert f"\n  {status} " in text


def test_sessions_list_survives_damaged_transcripts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)
    folder = Path(made["location"]["path"]).parent
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "dir.jsonl").mkdir()
    (folder / "other.jsonl").write_bytes(Path(made["location"]["path"]).read_bytes())  # header says another id
    proc = dsh("sessions", "list", home=home)
    assert proc.returncode == 0 and proc.stdout.startswith(made["session_id"])
    lines = proc.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith("dsh: warning: skipped a damaged session: ") for line in lines)
    assert any(
        f"{folder / 'other.jsonl'}: its header names session {made['session_id']}, not other" in x for x in lines
    )
    refused = dsh("sessions", "show", "other", home=home)
    assert refused.returncode == 1 and "its header names session" in refused.stderr
    assert refused.stderr.count("\n") == 1


def test_a_served_exec_follows_the_same_exit_statuses(tmp_path: Path) -> None:
    from tests.integration.serve_support import ServeProcess

    home, marker, started = tmp_path / "home", tmp_path / "marker", tmp_path / "started"
    server = ServeProcess(home)
    try:
        timed = dsh("exec", "--timeout", "0.5", "--", "echo partial; sleep 30", home=home)
        assert timed.returncode == 124 and timed.stdout == "partial\n"
        assert timed.stderr.endswith(
            "dsh: the command timed out after 0.5 s and its process group was killed; "
            "allow longer with --timeout SECONDS\n"
        )
        elsewhere = tmp_path / "elsewhere"  # its session folder is pulled away; keep the others intact
        elsewhere.mkdir()
        pull = 'd=$(dirname "$DSH_SESSION_JSONL"); rm -rf "$d"; touch "$d"; echo ran'
        failed = dsh("exec", "--", pull, home=home, cwd=elsewhere)
        assert failed.returncode == 125 and failed.stdout == "ran\n" and "could not be saved" in failed.stderr
        session_id = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)["session_id"]
        holder = _popen("exec", "--no-server", "--session", session_id, "--", f"echo > {started}; sleep 300", home=home)
        try:
            _wait_for(started, holder)
            locked = dsh("exec", "--session", session_id, "--", f"touch {marker}", home=home)
            assert locked.returncode == 125 and "is being written by process" in locked.stderr
            assert not marker.exists()
        finally:
            holder.send_signal(signal.SIGTERM)
            holder.communicate(timeout=30)
    finally:
        _, log = server.stop()
    assert log.count("exec in session") >= 3, "the execs were served"


def test_sqlite_sessions_list_survives_a_damaged_header(tmp_path: Path) -> None:
    home = tmp_path / "home"
    deployment = tmp_path / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    ids = [
        json.loads(dsh("exec", "--json", "--deployment", str(deployment), "--", "true", home=home).stdout)["session_id"]
        for _ in range(2)
    ]
    database = home / "sessions.sqlite3"
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE sessions SET header = '{not json' WHERE id = ?", (ids[0],))
    proc = dsh("sessions", "list", "--deployment", str(deployment), home=home)
    assert proc.returncode == 0 and proc.stdout.startswith(ids[1])
    (line,) = proc.stderr.splitlines()
    assert line.startswith("dsh: warning: skipped a damaged session: ") and str(database) in line and ids[0] in line


@pytest.mark.parametrize("json_output", [False, True])
@pytest.mark.parametrize("hooked", [False, True], ids=["blocking", "asyncio"])
def test_an_interrupted_command_keeps_what_it_printed_shown_and_recorded(
    tmp_path: Path, json_output: bool, hooked: bool
) -> None:
    home, pidfile = tmp_path / "home", tmp_path / "pid"
    if hooked:  # a hook runs the turn under asyncio: the cancellation carries the output the same way
        (home / "hooks").mkdir(parents=True)
        hook = {"type": "command", "command": "cat > /dev/null"}
        (home / "hooks" / "claude.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    flags = ["--json"] if json_output else []
    command = f"echo printed before; echo said before >&2; echo $$ > {pidfile}; sleep 300"
    proc = _popen("exec", "--no-server", *flags, "--", command, home=home)
    _wait_for(pidfile, proc)
    time.sleep(0.2)  # the output is in the pipes; dsh reads it as it comes
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    line = (
        "dsh: interrupted by SIGINT: a running command's process group was killed "
        "and the turn recorded as interrupted\n"
    )
    if json_output:
        document = json.loads(out)
        assert document["stdout"] == "printed before\n" and document["stderr"] == "said before\n"
        assert document["exit_code"] == 130 and document["interrupted"] == "SIGINT" and document["error"] is None
        assert err == line
    else:
        assert out == "printed before\n"
        assert err == "said before\n" + line
    events = _events(home, _only_session(home))
    (result,) = [e for e in events if e["type"] == "tool/result"]
    data = result["data"]["data"]  # type: ignore[index]
    assert data["interrupted"] == "SIGINT" and data["stdout"] == "printed before\n", data
    assert "printed before" in result["data"]["output"]  # type: ignore[index]
