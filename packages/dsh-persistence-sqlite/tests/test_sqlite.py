from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dsh.persistence.sqlite import SqlitePersistence
from dsh.session import SessionStore
from dsh.testing import OTHER_UID, as_other_uid, needs_root

WRITER = textwrap.dedent(
    """
    import sys
    from dsh.persistence.sqlite import SqlitePersistence
    from dsh.session import SessionEvent, SessionHeader
    backend = SqlitePersistence(sys.argv[1])
    header = SessionHeader(id=sys.argv[2], cwd="/w")
    for i in range(int(sys.argv[3])):
        backend.write(header, [SessionEvent(type="message/user", data={"i": i, "who": sys.argv[2]}) for _ in range(5)])
    backend.close()
    """
)


def test_database_uses_wal_and_is_created_at_first_write(tmp_path: Path) -> None:
    db = tmp_path / "db" / "s.sqlite3"
    backend = SqlitePersistence(db)
    store = SessionStore(lambda: backend)
    session = store.create(tmp_path)
    assert backend.locate(session.header) is None
    assert store.list() == []
    assert not db.exists()
    session.record("turn/start")
    session.flush()
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    backend.close()


@pytest.mark.integration
def test_two_processes_writing_at_once_do_not_corrupt(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), f"writer-{n}", "60"], stderr=subprocess.PIPE, text=True
        )
        for n in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    backend = SqlitePersistence(db)
    for n in range(2):
        events = backend.load(f"writer-{n}").events
        assert len(events) == 300
        assert [e.data["i"] for e in events[::5]] == list(range(60))
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    backend.close()


def test_two_writers_of_one_session_keep_one_sequence(tmp_path: Path) -> None:
    from dsh.session import SessionEvent, SessionHeader

    db = tmp_path / "s.sqlite3"
    first, second = SqlitePersistence(db), SqlitePersistence(db)
    header = SessionHeader(id="shared", cwd="/w")
    for n in range(3):
        first.write(header, [SessionEvent(type="message/user", data={"n": f"a{n}"})])
        second.write(header, [SessionEvent(type="message/user", data={"n": f"b{n}"})])
    assert [e.data["n"] for e in first.load("shared").events] == ["a0", "b0", "a1", "b1", "a2", "b2"]
    first.close()
    second.close()


def test_unserialisable_event_is_a_clear_error(tmp_path: Path) -> None:
    from dsh.session import PersistenceError, SessionEvent, SessionHeader

    backend = SqlitePersistence(tmp_path / "s.sqlite3")
    with pytest.raises(PersistenceError, match="event 'x' of session s cannot be stored as JSON"):
        backend.write(SessionHeader(id="s", cwd="/w"), [SessionEvent(type="x", data={"bad": object()})])
    backend.close()


def test_events_view_answers_per_event_sql(tmp_path: Path) -> None:
    from dsh.session import SessionEvent, SessionHeader

    db = tmp_path / "s.sqlite3"
    backend = SqlitePersistence(db)
    header = SessionHeader(id="viewed", cwd="/w")
    backend.write(header, [SessionEvent(type="turn/start"), SessionEvent(type="tool/call", data={"name": "bash"})])
    backend.write(header, [SessionEvent(type="tool/call", data={"name": "pwsh"})])
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT flush, position, json_extract(data, '$.name') FROM events "
            "WHERE session_id = 'viewed' AND type = 'tool/call' ORDER BY flush, position"
        )
        .fetchall()
    )
    assert rows == [(0, 1, "bash"), (1, 0, "pwsh")]
    backend.close()


def _header(session_id: str = "s1") -> Any:
    from dsh.session import SessionHeader

    return SessionHeader(id=session_id, cwd="/w")


def test_a_new_database_records_its_schema_version(tmp_path: Path) -> None:
    from dsh.persistence.sqlite import SCHEMA_VERSION

    db = tmp_path / "s.sqlite3"
    backend = SqlitePersistence(db)
    assert backend.migrate() == (0, SCHEMA_VERSION)
    backend.close()
    assert SqlitePersistence(db).migrate() == (SCHEMA_VERSION, SCHEMA_VERSION)
    rows = sqlite3.connect(db).execute("SELECT version, description FROM schema_version").fetchall()
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1)) and all(r[1] for r in rows)


def test_a_database_from_before_versioning_is_adopted_with_its_sessions(tmp_path: Path) -> None:
    from dsh.persistence.sqlite import MIGRATIONS, SCHEMA_VERSION

    db = tmp_path / "s.sqlite3"
    old = sqlite3.connect(db)
    old.executescript(MIGRATIONS[0][1])  # the schema as it was created before versions existed
    old.execute("INSERT INTO sessions VALUES ('old', '2026-01-01T00:00:00Z', ?)", (_header("old").to_json(),))
    old.execute("""INSERT INTO flushes VALUES ('old', 0, '[{"type": "turn/start", "at": 1.0, "data": {}}]')""")
    old.commit()
    old.close()
    backend = SqlitePersistence(db)
    assert [e.type for e in backend.load("old").events] == ["turn/start"]
    backend.close()
    assert sqlite3.connect(db).execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION


def test_a_newer_database_is_refused_and_never_written(tmp_path: Path) -> None:
    from dsh.session import PersistenceError, SessionEvent

    db = tmp_path / "s.sqlite3"
    backend = SqlitePersistence(db)
    backend.write(_header(), [SessionEvent(type="turn/start")])
    backend.close()
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO schema_version VALUES (99, 'x', 'from the future')")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    newer = SqlitePersistence(db)
    for attempt in (
        lambda: newer.write(_header("s2"), [SessionEvent(type="turn/start")]),
        lambda: newer.acquire(_header()),
        newer.list,
        newer.migrate,
    ):
        with pytest.raises(PersistenceError) as info:
            attempt()
        message = str(info.value)
        assert "\n" not in message and str(db) in message and "schema version 99" in message
        assert "upgrade dsh-persistence-sqlite" in message
    newer.close()
    assert db.read_bytes() == before


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 5000])
def test_a_damaged_database_is_one_line_naming_the_file(tmp_path: Path, content: bytes) -> None:
    from dsh.session import PersistenceError, SessionEvent

    db = tmp_path / "s.sqlite3"
    db.write_bytes(content)
    for attempt in (
        lambda b: b.list(),
        lambda b: b.load("s1"),
        lambda b: b.write(_header(), [SessionEvent(type="turn/start")]),
        lambda b: b.acquire(_header()),
    ):
        backend = SqlitePersistence(db)
        with pytest.raises(PersistenceError) as info:
            attempt(backend)
        message = str(info.value)
        assert "\n" not in message and str(db) in message, message
        backend.close()
    assert db.read_bytes() == content


def test_a_database_path_that_is_a_symlink_is_not_written_through(tmp_path: Path) -> None:
    from dsh.session import PersistenceError, SessionEvent

    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / "s.sqlite3").symlink_to(target)
    backend = SqlitePersistence(tmp_path / "s.sqlite3")
    with pytest.raises(PersistenceError, match=r"s\.sqlite3"):
        backend.write(_header(), [SessionEvent(type="turn/start")])
    assert target.read_text() == "keep"


def test_acquire_locks_one_session_across_backends_and_writes_no_session(tmp_path: Path) -> None:
    import os
    import stat

    from dsh.session import SessionLockedError

    db = tmp_path / "s.sqlite3"
    first, second = SqlitePersistence(db), SqlitePersistence(db)
    release = first.acquire(_header("s1"))
    assert first.list() == []
    lock = tmp_path / "s.sqlite3.locks" / "s1.lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    assert stat.S_IMODE(lock.parent.stat().st_mode) == 0o700
    with pytest.raises(SessionLockedError) as info:
        second.acquire(_header("s1"))
    assert "session s1" in str(info.value) and f"pid {os.getpid()}" in str(info.value) and str(lock) in str(info.value)
    second.acquire(_header("s2"))()  # another session is free
    release()
    release()  # idempotent
    assert not lock.exists(), "the holder removes its lock file as it releases"
    second.acquire(_header("s1"))()
    assert list(lock.parent.iterdir()) == [], "one file per lock held now, not per session ever locked"
    first.close()
    second.close()


_CONTENDER = """
import os, sys, time
from dsh.persistence.sqlite._lock import lock_file
from dsh.session import SessionLockedError
locks, inside, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
held = 0
for _ in range(rounds):
    try:
        release = lock_file(locks, "s1")
    except SessionLockedError:
        continue
    try:
        os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # a second holder fails here
        time.sleep(0.0002)
        os.unlink(inside)
        held += 1
    finally:
        release()
print(held)
"""


def test_removing_released_lock_files_never_lets_two_processes_hold_one_session(tmp_path: Path) -> None:
    # A taker that opened the file just before its holder removed it, or another that then made the
    # name anew, would otherwise each hold a lock on a different file: both inside at once.
    locks, inside = tmp_path / "locks", tmp_path / "inside"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _CONTENDER, str(locks), str(inside), "400"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outcomes = [w.communicate(timeout=120) for w in workers]
    for worker, (_, err) in zip(workers, outcomes, strict=True):
        assert worker.returncode == 0, err  # FileExistsError: two holders at once
    assert sum(int(out) for out, _ in outcomes) > 0
    assert list(locks.iterdir()) == [], "every holder removed its file"


def test_acquire_is_held_against_another_process_and_dropped_when_it_dies(tmp_path: Path) -> None:
    from dsh.session import SessionLockedError

    db = tmp_path / "s.sqlite3"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from dsh.persistence.sqlite import SqlitePersistence; from dsh.session import SessionHeader;"
            "SqlitePersistence(sys.argv[1]).acquire(SessionHeader(id='s1', cwd='/w')); print('held', flush=True);"
            "sys.stdin.read()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    backend = SqlitePersistence(db)
    with pytest.raises(SessionLockedError, match=f"pid {holder.pid}"):
        backend.acquire(_header("s1"))
    holder.kill()
    holder.wait()
    backend.acquire(_header("s1"))()
    backend.close()


def test_acquire_refuses_a_lock_file_replaced_by_a_symlink(tmp_path: Path) -> None:
    from dsh.session import PersistenceError

    db = tmp_path / "s.sqlite3"
    backend = SqlitePersistence(db)
    backend.acquire(_header("s1"))()
    target = tmp_path / "target"
    target.write_text("keep")
    lock = tmp_path / "s.sqlite3.locks" / "s1.lock"
    assert not lock.exists(), "a released lock leaves no file"
    lock.symlink_to(target)
    with pytest.raises(PersistenceError, match=r"s1\.lock"):
        backend.acquire(_header("s1"))
    assert target.read_text() == "keep"
    backend.close()


def test_acquire_on_an_unwritable_database_is_one_line_naming_it(tmp_path: Path) -> None:
    import os

    from dsh.session import PersistenceError

    if os.geteuid() == 0:
        pytest.skip("root writes read-only files; needs a non-root uid")
    db = tmp_path / "s.sqlite3"
    SqlitePersistence(db).migrate()
    db.chmod(0o400)
    backend = SqlitePersistence(db)
    with pytest.raises(PersistenceError, match=str(db)):
        backend.acquire(_header("s1"))
    backend.close()


def _turns(store: SessionStore, session_id: str | None, count: int, cwd: Path) -> str:
    session = store.create(cwd) if session_id is None else store.resume(session_id, history=False)
    for _ in range(count):
        session.acquire()
        turn_id = session.new_turn_id()
        session.record("turn/start", turn_id=turn_id)
        session.record("tool/call", call_id="c")
        session.record("turn/end", turn_id=turn_id)
        session.flush()
    return session.id


def test_resume_reads_only_the_newest_flushes_and_continues_the_turn_numbers(tmp_path: Path) -> None:
    from dsh.session import PersistenceError, SessionEvent

    db = tmp_path / "s.sqlite3"
    backend = SqlitePersistence(db)
    store = SessionStore(lambda: backend)
    sid = _turns(store, None, 3, tmp_path)
    # A flush without a turn (SessionEnd's record, say) is passed over on the way back.
    backend.write(store.resume(sid).header, [SessionEvent(type="hook/result")])
    # Damage the oldest flush: a tail never reads it, a whole load reports it.
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE flushes SET events = 'garbage' WHERE session_id = ? AND seq = 0", (sid,))
    tail = backend.tail(sid)
    assert tail is not None and tail.last_turn == 3 and tail.header.id == sid
    resumed = store.resume(sid, lock=True, history=False)
    assert resumed.new_turn_id() == f"{sid}:turn-4" and resumed.turns == 3
    resumed.release()
    with pytest.raises(PersistenceError, match=f"session {sid} is damaged: a flush is not JSON") as err:
        backend.load(sid)
    assert err.value.session_id == sid
    backend.close()


def test_a_tail_it_cannot_read_falls_back_to_the_whole_load(tmp_path: Path) -> None:
    from dsh.session import PersistenceError, SessionNotFoundError

    db = tmp_path / "s.sqlite3"
    backend = SqlitePersistence(db)
    store = SessionStore(lambda: backend)
    sid = _turns(store, None, 2, tmp_path)
    with pytest.raises(SessionNotFoundError):
        backend.tail("missing")
    with sqlite3.connect(db) as raw:
        # A flush stored in the compact layout of earlier versions is read whole.
        raw.execute(
            "UPDATE flushes SET events = ? WHERE session_id = ? AND seq = 1",
            ('[{"type":"turn/start","at":1,"data":{"turn_id":"x:turn-7"}}]', sid),
        )
    tail = backend.tail(sid)
    assert tail is not None and tail.last_turn == 7
    with sqlite3.connect(db) as raw:
        raw.execute('UPDATE flushes SET events = \'[\n{"type":"turn/start",\n]\' WHERE session_id = ?', (sid,))
    assert backend.tail(sid) is None
    with pytest.raises(PersistenceError, match="is damaged"):
        store.resume(sid, history=False)  # the store loads it whole, which names the damage
    backend.close()


def test_a_damaged_header_is_named_with_its_session(tmp_path: Path) -> None:
    from dsh.session import PersistenceError

    db = tmp_path / "s.sqlite3"
    backend = SqlitePersistence(db)
    store = SessionStore(lambda: backend)
    sid = _turns(store, None, 1, tmp_path)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE sessions SET header = json_set(header, '$.cwd', 'rel') WHERE id = ?", (sid,))
    for read in (backend.load, backend.tail):
        with pytest.raises(PersistenceError, match=f"session {sid} is damaged: field 'cwd' must be an absolute") as err:
            read(sid)
        assert err.value.session_id == sid
    assert backend.scan().damaged == (
        f"{backend.where}: the header of session {sid} is damaged: field 'cwd' must be an absolute path, not 'rel'",
    )
    backend.close()


def _plant(path: Path, folder_mode: int | None) -> None:
    """As another user: make ``path`` (0666), in a folder of theirs (``folder_mode``) or right where it is."""

    def work() -> None:
        if folder_mode is not None:
            path.parent.mkdir()
            path.parent.chmod(folder_mode)
        path.write_bytes(b"")
        path.chmod(0o666)

    assert as_other_uid(work) == 0


@needs_root
@pytest.mark.parametrize(
    ("where", "folder_mode", "fault"),
    [
        ("theirs/s.sqlite3", 0o777, f"session database folder {{dir}}: it is owned by uid {OTHER_UID}"),
        ("s.sqlite3", None, "session database folder {dir}: it is a shared folder others can add files to"),
    ],
)
def test_a_database_another_user_made_outside_the_home_is_never_written(
    sticky_tmp: Path, where: str, folder_mode: int | None, fault: str
) -> None:
    from dsh.session import PersistenceError

    db = sticky_tmp / where
    _plant(db, folder_mode)
    backend = SqlitePersistence(db)
    with pytest.raises(PersistenceError) as err:
        backend.write(_header("s1"), [])
    assert str(err.value).startswith(f"refusing {fault.format(dir=db.parent)}"), err.value
    assert db.stat().st_size == 0 and not db.with_name(db.name + "-wal").exists()
    with pytest.raises(PersistenceError, match=f"^refusing {fault.format(dir=db.parent)}"):
        SqlitePersistence(db).list()  # nor read as a store of ours
    backend.close()


def test_a_database_others_can_write_is_refused_with_the_fix(tmp_path: Path) -> None:
    from dsh.session import PersistenceError

    db = tmp_path / "s.sqlite3"
    SqlitePersistence(db).migrate()
    db.chmod(0o666)
    with pytest.raises(PersistenceError) as err:
        SqlitePersistence(db).acquire(_header("s1"))
    assert str(err.value) == (
        f"refusing session database {db}: it is writable by group or others (mode 0666); run `chmod 600 {db}`"
    )


def test_a_taker_whose_file_was_removed_as_it_locked_takes_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The interleaving the stress test above hits by chance, made certain: the taker has opened the
    # file, then (before its flock) the holder releases and removes it, and a third takes the name anew.
    import fcntl

    from dsh.persistence.sqlite._lock import lock_file
    from dsh.session import SessionLockedError

    locks = str(tmp_path / "locks")
    first = lock_file(locks, "s1")
    real_flock = fcntl.flock
    third: list[Any] = []

    def interleaved(fd: int, operation: int) -> None:
        if not third:
            third.append(None)
            first()
            third[0] = lock_file(locks, "s1")  # made the name anew: it holds the lock now
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", interleaved)
    with pytest.raises(SessionLockedError, match=f"pid {os.getpid()}"):
        lock_file(locks, "s1")  # without the check it would hold the removed file beside the third
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert third[0] is not None
    third[0]()
    lock_file(locks, "s1")()
    assert os.listdir(locks) == []
