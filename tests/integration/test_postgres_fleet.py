"""Many hosts, one store: ``dsh`` processes with different homes sharing one PostgreSQL database."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh.persistence.postgres import SCHEMA_VERSION
from tests.helpers import dsh
from tests.integration.serve_support import ServeProcess, clean_env

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL driver psycopg is not installed")

pytestmark = pytest.mark.integration


def _deployment(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(f"persistence: {{backend: postgres, config: {json.dumps(config)}}}\n")
    return path


def _libpq_env(server: Any) -> dict[str, str]:
    return {
        "PGHOST": server.host,
        "PGPORT": str(server.port),
        "PGUSER": server.user,
        "PGDATABASE": server.database,
        "PGPASSWORD": server.password,
    }


def test_two_hosts_see_and_resume_each_others_sessions(tmp_path: Path, postgres_server: Any, pg_schema: str) -> None:
    # Host A names the server in its deployment; host B relies on libpq's environment alone.
    host_a = _deployment(tmp_path / "a.yaml", {"dsn": postgres_server.dsn, "schema": pg_schema})
    host_b = _deployment(tmp_path / "b.yaml", {"schema": pg_schema})
    b_env = _libpq_env(postgres_server)
    # Hooks of both dialects on host A: rows in a database are no transcript file.
    (tmp_path / "home-a" / "hooks").mkdir(parents=True)
    for dialect in ("claude", "codex"):
        hook = {"type": "command", "command": f"cat > {tmp_path / dialect}.json"}
        (tmp_path / "home-a" / "hooks" / f"{dialect}.json").write_text(
            json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}})
        )
    made = dsh(
        "exec",
        "--json",
        "--deployment",
        str(host_a),
        "--",
        'echo "$DSH_SESSION_ID ${DSH_SESSION_JSONL-unset}"',
        home=tmp_path / "home-a",
    )
    assert made.returncode == 0, made.stderr
    out = json.loads(made.stdout)
    assert out["location"] is None and out["stdout"] == f"{out['session_id']} unset\n"
    claude = json.loads((tmp_path / "claude.json").read_text())
    codex = json.loads((tmp_path / "codex.json").read_text())
    assert claude["session_id"] == codex["session_id"] == out["session_id"]
    # Rows in a database are no transcript file: Codex gets null; Claude Code its view, kept by host A.
    view = tmp_path / "home-a" / "transcripts" / "claude-code" / f"{out['session_id']}.jsonl"
    assert claude["transcript_path"] == str(view) and codex["transcript_path"] is None
    listed = dsh("sessions", "list", "--json", "--deployment", str(host_b), home=tmp_path / "home-b", env=b_env)
    assert listed.returncode == 0, listed.stderr
    assert [s["id"] for s in json.loads(listed.stdout)["sessions"]] == [out["session_id"]]
    resumed = dsh(
        "exec",
        "--json",
        "--session",
        out["session_id"],
        "--deployment",
        str(host_b),
        "--",
        "echo $DSH_SESSION_ID",
        home=tmp_path / "home-b",
        env=b_env,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["stdout"] == out["session_id"] + "\n"
    shown = dsh("sessions", "show", out["session_id"], "--json", "--deployment", str(host_a), home=tmp_path / "home-a")
    events = json.loads(shown.stdout)["events"]
    turn_ids = [e["data"]["turn_id"] for e in events if e["type"] == "turn/start"]
    assert len(turn_ids) == 2 and len(set(turn_ids)) == 2
    located = dsh("sessions", "locate", out["session_id"], "--deployment", str(host_a), home=tmp_path / "home-a")
    assert located.returncode == 1 and located.stdout == "", "no file: nothing a script could take for a path"
    assert "has no transcript file: the postgres backend keeps it in its database" in located.stderr
    assert not (tmp_path / "home-a" / "sessions").exists() and not (tmp_path / "home-b" / "sessions").exists()


def test_plugins_and_errors_never_show_the_password(tmp_path: Path, postgres_server: Any, pg_schema: str) -> None:
    good = _deployment(tmp_path / "good.yaml", {"dsn": postgres_server.dsn, "schema": pg_schema})
    shown = dsh("plugins", "--json", "--deployment", str(good), home=tmp_path / "h")
    assert shown.returncode == 0, shown.stderr
    rows = {(r["group"], r["name"]): r for r in json.loads(shown.stdout)["plugins"]}
    assert rows[("dsh.persistence", "postgres")]["distribution"] == "dsh-persistence-postgres"
    assert rows[("dsh.persistence", "postgres")]["state"] == "active"
    assert postgres_server.password not in shown.stdout + shown.stderr

    wrong = "Wrong-Secret-99"
    bad = _deployment(
        tmp_path / "bad.yaml",
        {"dsn": postgres_server.dsn.replace(postgres_server.password, wrong), "schema": pg_schema},
    )
    marker = tmp_path / "ran"
    for argv in (
        ["sessions", "list", "--deployment", str(bad)],
        ["exec", "--deployment", str(bad), "--session", "some-session", "--", f"touch {marker}"],
        ["exec", "--deployment", str(bad), "--", f"touch {marker}"],
        ["sessions", "migrate", "--deployment", str(bad)],
    ):
        proc = dsh(*argv, home=tmp_path / "h")
        assert proc.returncode != 0
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert f"127.0.0.1:{postgres_server.port}" in proc.stderr and "password authentication failed" in proc.stderr
        assert wrong not in proc.stderr + proc.stdout
        assert "Traceback" not in proc.stderr
    assert not marker.exists()
    listed = dsh("plugins", "--json", "--deployment", str(bad), home=tmp_path / "h")
    assert wrong not in listed.stdout + listed.stderr
    row = {(r["group"], r["name"]): r for r in json.loads(listed.stdout)["plugins"]}[("dsh.persistence", "postgres")]
    assert row["state"] == "failed" and "password authentication failed" in row["error"]


def test_sessions_migrate_applies_once_and_refuses_a_newer_schema(
    tmp_path: Path, postgres_server: Any, pg_schema: str
) -> None:
    deployment = _deployment(tmp_path / "d.yaml", {"dsn": postgres_server.dsn, "schema": pg_schema})
    first = dsh("sessions", "migrate", "--deployment", str(deployment), home=tmp_path / "h")
    assert first.returncode == 0 and first.stdout.strip().endswith(f"schema version {SCHEMA_VERSION} (was 0)"), (
        first.stderr
    )
    again = dsh("sessions", "migrate", "--deployment", str(deployment), home=tmp_path / "h")
    assert again.stdout.strip().endswith(f"schema version {SCHEMA_VERSION} (up to date)")
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {pg_schema}.schema_version (version, description) VALUES (7, 'future')")
    newer = dsh("sessions", "migrate", "--deployment", str(deployment), home=tmp_path / "h")
    assert newer.returncode == 1 and newer.stderr.count("\n") == 1
    assert "schema version 7" in newer.stderr and "upgrade dsh-persistence-postgres" in newer.stderr


def test_sqlite_damage_is_one_line_naming_the_database(tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    home = tmp_path / "h"
    home.mkdir()
    (home / "sessions.sqlite3").write_bytes(b"garbage, not a database" * 200)
    for argv in (["sessions", "list"], ["sessions", "show", "x"], ["sessions", "migrate"]):
        proc = dsh(*argv, "--deployment", str(deployment), home=home)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert str(home / "sessions.sqlite3") in proc.stderr and "Traceback" not in proc.stderr


def test_sessions_migrate_on_sqlite_and_on_a_backend_without_schema(tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    home = tmp_path / "h"
    first = dsh("sessions", "migrate", "--deployment", str(deployment), home=home)
    assert first.returncode == 0, first.stderr
    from dsh.persistence.sqlite import SCHEMA_VERSION as SQLITE_VERSION

    assert first.stdout == f"session database {home / 'sessions.sqlite3'}: schema version {SQLITE_VERSION} (was 0)\n"
    assert dsh("sessions", "migrate", "--deployment", str(deployment), home=home).stdout.endswith("(up to date)\n")
    jsonl = dsh("sessions", "migrate", home=home)
    assert jsonl.returncode == 0 and jsonl.stdout == "the jsonl backend keeps no schema: nothing to migrate\n"


def test_server_going_away_during_a_dsh_exec_turn(tmp_path: Path, postgres_server: Any, pg_schema: str) -> None:
    import shlex

    deployment = _deployment(tmp_path / "d.yaml", {"dsn": postgres_server.dsn, "schema": pg_schema})
    home = tmp_path / "h"
    first = dsh("exec", "--json", "--deployment", str(deployment), "--", "echo turn-1", home=home)
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session_id"]
    # The command itself stops the server: the turn ran, its flush cannot reach the database.
    stop = shlex.join(postgres_server.stop_argv("fast"))
    try:
        lost = dsh(
            "exec",
            "--deployment",
            str(deployment),
            "--session",
            session,
            "--",
            f"{stop} >/dev/null; echo ran",
            home=home,
        )
        assert lost.returncode in (1, 125), lost  # 125 once dsh exec reports a failed save after the command
        last = lost.stderr.strip().splitlines()[-1]
        assert f"127.0.0.1:{postgres_server.port}" in last and f"writing session {session}" in last
        assert postgres_server.password not in lost.stderr + lost.stdout
    finally:
        postgres_server.start()
    again = dsh("exec", "--json", "--deployment", str(deployment), "--session", session, "--", "echo turn-3", home=home)
    assert again.returncode == 0, again.stderr
    shown = json.loads(dsh("sessions", "show", session, "--json", "--deployment", str(deployment), home=home).stdout)
    outputs = [e["data"]["data"]["stdout"] for e in shown["events"] if e["type"] == "tool/result"]
    assert outputs[0] == "turn-1\n" and outputs[-1] == "turn-3\n"


def test_an_exhausted_pool_queues_served_commands_and_never_stalls_the_server(
    tmp_path: Path, postgres_server: Any, pg_schema: str
) -> None:
    # Each running turn holds one pooled connection (its lock lives there): with two, eight
    # commands at once take turns. A turn waiting for a connection must not hold up dsh serve's
    # one event loop, or the two running ones cannot finish and give theirs back.
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = {"dsn": postgres_server.dsn, "schema": pg_schema, "pool_min_size": 1, "pool_max_size": 2}
    _deployment(home / "deployment.yaml", config).chmod(0o600)
    server = ServeProcess(home)
    try:
        start = time.monotonic()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "dsh.cli", "exec", "--json", "--", f"sleep 1; echo ran {i}"],
                env=clean_env(home),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(8)
        ]
        outputs = [proc.communicate(timeout=120) for proc in procs]
        elapsed = time.monotonic() - start
        assert [proc.returncode for proc in procs] == [0] * 8, [err for _, err in outputs]
        assert [json.loads(out)["stdout"] for out, _ in outputs] == [f"ran {i}\n" for i in range(8)]
        # Four rounds of one second, not a loop stalled on each wait (12-20 s, and failures).
        assert elapsed < 9, elapsed
    finally:
        code, log = server.stop()
    assert code == 0, log
    assert "Traceback" not in log, log
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        stored = conn.execute(f"SELECT count(*) FROM {pg_schema}.sessions").fetchone()
    assert stored == (8,)


def _terminate_dsh_connections(server: Any) -> int:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name LIKE 'dsh %' AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_connections_lost_under_dsh_serve_never_print_the_drivers_log(
    tmp_path: Path, postgres_server: Any, pg_schema: str
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = {"dsn": postgres_server.dsn, "schema": pg_schema, "pool_min_size": 2, "pool_max_size": 2}
    _deployment(home / "deployment.yaml", config).chmod(0o600)
    server = ServeProcess(home)
    try:
        assert dsh("exec", "--", "echo one", home=home).stdout == "one\n"
        assert _terminate_dsh_connections(postgres_server) >= 1  # the pool's idle connections die
        second = dsh("exec", "--", "echo two", home=home)  # served: the pool finds them broken
        assert second.returncode == 0 and second.stdout == "two\n", second.stderr
        assert second.stderr == ""
    finally:
        code, log = server.stop()
    assert code == 0
    assert "discarding" not in log and "psycopg" not in log, log
