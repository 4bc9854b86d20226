"""Files someone else could replace or edit: FIFOs where dsh reads, edited SQLite rows, moved sessions.

Each test runs the real ``dsh`` command on real FIFOs and real database files, with a timeout that
turns a hang (an ``open()`` waiting for a FIFO writer) into a failure.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import dsh

pytestmark = pytest.mark.integration

HANG = 30  # seconds: far above a cold `dsh exec`, far below a hang worth waiting for


def _new_session(home: Path, *args: str, cwd: str | None = None) -> dict[str, object]:
    where = ("--cwd", cwd) if cwd else ()
    done = dsh("exec", "--no-server", "--json", *where, *args, "--", "echo one", home=home, timeout=HANG)
    assert done.returncode == 0, done
    made: dict[str, object] = json.loads(done.stdout)
    return made


def test_a_fifo_as_the_discovery_cache_is_ignored_and_rewritten(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _new_session(home)
    cache = home / "run" / "discovery.cache"
    cache.unlink()
    os.mkfifo(cache, 0o600)
    done = dsh("exec", "--no-server", "--", "echo ran", home=home, timeout=HANG)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done
    assert cache.is_file()  # replaced by a regular cache file


def test_a_fifo_named_as_a_session_is_refused_by_every_verb(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _new_session(home)
    (folder,) = (home / "sessions").iterdir()
    fifo = folder / "ff.jsonl"
    os.mkfifo(fifo, 0o600)
    expected = f"dsh: {fifo} is not a regular file; move it aside\n"
    resumed = dsh("exec", "--no-server", "--session", "ff", "--", "echo ran", home=home, timeout=HANG)
    assert (resumed.returncode, resumed.stdout, resumed.stderr) == (125, "", expected)
    for verb in ("show", "locate"):
        done = dsh("sessions", verb, "ff", home=home, timeout=HANG)
        assert (done.returncode, done.stderr) == (1, expected), done


def test_a_fifo_as_the_deployment_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "d.yaml"
    os.mkfifo(fifo, 0o600)
    done = dsh("exec", "--no-server", "--deployment", str(fifo), "--", "true", home=tmp_path / "h", timeout=HANG)
    assert done.returncode == 125 and "it is a FIFO, not a regular file" in done.stderr, done
    assert str(fifo) in done.stderr and len(done.stderr.splitlines()) == 1


def test_resume_writes_the_file_it_read_even_when_the_header_cwd_was_edited(tmp_path: Path) -> None:
    home = tmp_path / "h"
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    made = _new_session(home, cwd=str(work))
    path = Path(str(made["location"]["path"]))  # type: ignore[index]
    head, rest = path.read_bytes().split(b"\n", 1)
    head = head.replace(json.dumps(str(work)).encode(), json.dumps(str(elsewhere)).encode())
    path.write_bytes(head + b"\n" + rest)
    done = dsh("exec", "--no-server", "--json", "--session", str(made["session_id"]), "--", "echo two", home=home)
    assert done.returncode == 0, done
    assert json.loads(done.stdout)["location"]["path"] == str(path)
    assert sorted(home.glob("sessions/*/*.jsonl")) == [path]
    assert b"echo two" in path.read_bytes()
    located = dsh("sessions", "locate", str(made["session_id"]), home=home)
    assert located.stdout.strip() == str(path)


def test_resume_in_a_missing_cwd_exits_125_and_writes_nothing(tmp_path: Path) -> None:
    home, work = tmp_path / "h", tmp_path / "gone"
    work.mkdir()
    made = _new_session(home, cwd=str(work))
    path = Path(str(made["location"]["path"]))  # type: ignore[index]
    before = path.read_bytes()
    work.rmdir()
    done = dsh("exec", "--no-server", "--json", "--session", str(made["session_id"]), "--", "echo two", home=home)
    assert done.returncode == 125, done
    assert f"its working directory {work} does not exist" in json.loads(done.stdout)["error"]
    assert path.read_bytes() == before
    assert sorted(home.glob("sessions/*/*.jsonl")) == [path]


def _sqlite(tmp_path: Path) -> tuple[Path, Path, str]:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    home = tmp_path / "h"
    made = _new_session(home, "--deployment", str(deployment))
    return home, deployment, str(made["session_id"])


def _edit(home: Path, sql: str) -> None:
    with sqlite3.connect(home / "sessions.sqlite3") as conn:
        conn.execute(sql)


def test_sqlite_refuses_a_header_naming_another_session(tmp_path: Path) -> None:
    home, deployment, sid = _sqlite(tmp_path)
    _edit(home, """UPDATE sessions SET header = '{"id":"other","cwd":"/tmp"}'""")
    refusal = f"session database {home / 'sessions.sqlite3'}: its header names session other, not {sid}; refusing it"
    done = dsh("exec", "--deployment", str(deployment), "--session", sid, "--", "echo two", home=home)
    assert (done.returncode, done.stdout, done.stderr) == (125, "", f"dsh: {refusal}\n")
    listed = dsh("sessions", "list", "--deployment", str(deployment), home=home)
    assert "other" not in listed.stdout and refusal in listed.stderr, listed
    with sqlite3.connect(home / "sessions.sqlite3") as conn:
        assert conn.execute("SELECT id FROM sessions").fetchall() == [(sid,)]


def test_a_damaged_flush_number_shows_the_output_and_exits_125(tmp_path: Path) -> None:
    home, deployment, sid = _sqlite(tmp_path)
    _edit(home, "UPDATE flushes SET seq = 'x'")
    args = ("exec", "--no-server", "--deployment", str(deployment), "--session", sid)
    plain = dsh(*args, "--", "echo SHOULD-PRINT", home=home)
    assert (plain.returncode, plain.stdout) == (125, "SHOULD-PRINT\n"), plain
    assert len(plain.stderr.splitlines()) == 1 and "field 'flushes.seq'" in plain.stderr and sid in plain.stderr
    as_json = dsh(*args, "--json", "--", "echo SHOULD-PRINT", home=home)
    document = json.loads(as_json.stdout)
    assert as_json.returncode == 125 and document["stdout"] == "SHOULD-PRINT\n"
    assert "field 'flushes.seq'" in document["error"] and "Traceback" not in as_json.stderr


@pytest.mark.parametrize("shape", ["nested", "huge"])
def test_a_deeply_nested_or_huge_deployment_is_one_line_naming_it(tmp_path: Path, shape: str) -> None:
    home, deployment = tmp_path / "home", tmp_path / "deployment.yaml"
    home.mkdir(mode=0o700)
    if shape == "nested":
        deployment.write_text("plugins: " + "[" * 2000 + "]" * 2000 + "\n")
        why = f"dsh: {deployment}: invalid YAML: nested too deeply (a deployment needs a few levels)\n"
    else:
        deployment.write_text("# padding\n" * 1_200_000)  # 12 MB, refused before YAML reads a byte of it
        why = (
            f"dsh: {deployment}: a deployment file may hold at most 1048576 bytes (1 MiB), and this one holds more; "
            "is it the right file?\n"
        )
    deployment.chmod(0o600)
    ran = dsh("exec", "--no-server", "--json", "--deployment", str(deployment), "--", "echo ran", home=home)
    assert ran.returncode == 125, ran.stderr
    assert ran.stderr == why
    document = json.loads(ran.stdout)
    assert document["exit_code"] is None and document["error"] == why.removeprefix("dsh: ").rstrip("\n")
    listed = dsh("plugins", "--deployment", str(deployment), home=home)
    assert listed.returncode == 1 and listed.stderr == why
