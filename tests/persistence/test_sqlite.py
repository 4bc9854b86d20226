from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh.persistence.sqlite import SqlitePersistence
from dsh.session import SessionStore

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
    with pytest.raises(PersistenceError, match="an event of session s cannot be stored as JSON"):
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
