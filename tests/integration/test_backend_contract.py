"""One contract suite for every persistence backend."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.persistence.jsonl import JsonlPersistence
from dsh.persistence.sqlite import SqlitePersistence
from dsh.session import (
    PersistenceError,
    SessionEvent,
    SessionLockedError,
    SessionNotFoundError,
    SessionStore,
)
from dsh.session.persistence import SessionPersistence, SessionTail, TailingPersistence, WriteAheadPersistence


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionPersistence]:
    root = tmp_path / "store"
    made: SessionPersistence
    if request.param == "jsonl":
        made = JsonlPersistence(root / "sessions")
    elif request.param == "sqlite":
        made = SqlitePersistence(root / "db.sqlite3")
    else:
        from dsh.persistence.postgres import PostgresPersistence

        server = request.getfixturevalue("postgres_server")
        made = PostgresPersistence(server.dsn, schema=request.getfixturevalue("pg_schema"))
    yield made
    made.close()


@pytest.fixture
def store(backend: SessionPersistence) -> SessionStore:
    return SessionStore(lambda: backend)


def test_backend_satisfies_protocol(backend: SessionPersistence) -> None:
    assert isinstance(backend, SessionPersistence)


def test_create_has_id_before_first_turn_and_writes_nothing(store: SessionStore, tmp_path: Path) -> None:
    session = store.create(tmp_path)
    assert session.id
    assert store.list() == []
    assert not (tmp_path / "store").exists()


def test_append_flush_load_roundtrip(store: SessionStore, tmp_path: Path) -> None:
    session = store.create(tmp_path)
    session.record("turn/start", turn_id="t1")
    session.record("message/user", text="héllo")
    assert session.flush() == 2
    assert session.flush() == 0
    session.record("turn/end", turn_id="t1")
    session.flush()
    loaded = store.resume(session.id)
    assert loaded.header == session.header
    assert [(e.type, e.data) for e in loaded.history] == [
        ("turn/start", {"turn_id": "t1"}),
        ("message/user", {"text": "héllo"}),
        ("turn/end", {"turn_id": "t1"}),
    ]
    assert loaded.damage == ()


def test_strings_utf8_cannot_encode_are_kept_escaped_not_the_turn_lost(store: SessionStore, tmp_path: Path) -> None:
    session = store.create(tmp_path)
    # A lone surrogate from a model or hook, and a non-UTF-8 byte of a command line (surrogateescape).
    session.record("tool/call", arguments={"description": "\ud800", "command": "ls caf\udce9.txt"})
    session.record("message/user", text="fine")
    assert session.flush() == 2
    loaded = store.resume(session.id)
    assert [(e.type, e.data) for e in loaded.history] == [
        ("tool/call", {"arguments": {"description": "\\ud800", "command": "ls caf\\udce9.txt"}}),
        ("message/user", {"text": "fine"}),
    ]


def test_only_flushed_prefix_is_stored_during_a_turn(store: SessionStore, tmp_path: Path) -> None:
    session = store.create(tmp_path)
    session.record("turn/start")
    session.flush()
    session.record("message/user", text="buffered")
    assert [e.type for e in store.resume(session.id).history] == ["turn/start"]


def test_list_returns_headers(store: SessionStore, tmp_path: Path) -> None:
    ids = []
    for _ in range(3):
        session = store.create(tmp_path)
        session.record("turn/start")
        session.flush()
        ids.append(session.id)
    assert sorted(h.id for h in store.list()) == sorted(ids)


def test_resume_keeps_id_and_location(store: SessionStore, tmp_path: Path) -> None:
    session = store.create(tmp_path)
    session.record("turn/start")
    session.flush()
    resumed = store.resume(session.id)
    assert resumed.id == session.id
    assert resumed.locate() == session.locate()
    resumed.record("turn/start")
    resumed.flush()
    assert len(store.resume(session.id).history) == 2


def test_every_backend_resumes_from_its_tail(backend: SessionPersistence, store: SessionStore, tmp_path: Path) -> None:
    """Resume without history costs the same at any length: each backend reads a header and the last turn."""
    assert isinstance(backend, TailingPersistence)
    session = store.create(tmp_path)
    for _ in range(3):
        session.acquire()
        turn_id = session.new_turn_id()
        session.record("turn/start", turn_id=turn_id)
        session.record("tool/call", call_id="c", arguments={"command": 'echo\n{"type":"turn/start"}'})
        session.record("turn/end", turn_id=turn_id)
        session.flush()
    assert backend.tail(session.id) == SessionTail(session.header, 3)
    resumed = store.resume(session.id, history=False)
    assert resumed.header == session.header and resumed.turns == 3
    assert resumed.new_turn_id() == f"{session.id}:turn-4"
    assert resumed.history == store.resume(session.id).history  # read on first use
    with pytest.raises(SessionNotFoundError):
        backend.tail("no-such-session")


def test_fork_seeds_up_to_a_boundary(store: SessionStore, tmp_path: Path) -> None:
    session = store.create(tmp_path)
    for i in range(4):
        session.record("message/user", text=str(i))
    session.flush()
    fork = store.fork(session.id, upto=2)
    assert fork.id != session.id
    assert fork.header.parent_session == session.id and fork.header.origin == "fork"
    assert fork.header.seed_length == 2
    fork.flush()
    assert [e.data["text"] for e in store.resume(fork.id).history] == ["0", "1"]
    assert backend_location_differs(store, session.header, fork.header)


def backend_location_differs(store: SessionStore, a: object, b: object) -> bool:
    la, lb = store.locate(a), store.locate(b)  # type: ignore[arg-type]
    return (la is None and lb is None) or la != lb


def test_spawn_records_parent_and_depth(store: SessionStore, tmp_path: Path) -> None:
    parent = store.create(tmp_path)
    child = store.spawn(parent.header)
    assert child.id != parent.id
    assert child.header.parent_session == parent.id
    assert child.header.origin == "subagent"
    assert child.header.delegation_depth == parent.header.delegation_depth + 1
    assert backend_location_differs(store, parent.header, child.header)
    child.record("turn/start")
    child.flush()
    assert store.resume(child.id).header.parent_session == parent.id


def test_missing_session_is_not_found(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError, match="no session nope"):
        store.resume("nope")


def test_locate_is_pure(backend: SessionPersistence, store: SessionStore, tmp_path: Path) -> None:
    session = store.create(tmp_path)
    location = backend.locate(session.header)
    assert not (tmp_path / "store").exists(), "locate must not create the root"
    if not isinstance(backend, JsonlPersistence):
        assert location is None  # rows in a database are no per-session file
        return
    assert location is not None and location.kind == "jsonl"
    assert os.path.isabs(location.path)
    assert not os.path.exists(location.path)
    assert location.path.startswith(str(tmp_path / "store" / "sessions") + os.sep)
    session.record("turn/start")
    session.flush()
    assert os.path.exists(location.path)
    assert backend.locate(store.resume(session.id).header) == location


# -- the write lock (acquire) -------------------------------------------------------------------


def _second(backend: SessionPersistence, tmp_path: Path, request: pytest.FixtureRequest) -> SessionPersistence:
    """Another handle on the same store, as a second process would open it."""
    root = tmp_path / "store"
    if isinstance(backend, SqlitePersistence):
        return SqlitePersistence(root / "db.sqlite3")
    if isinstance(backend, JsonlPersistence):
        return JsonlPersistence(root / "sessions")
    from dsh.persistence.postgres import PostgresPersistence

    server = request.getfixturevalue("postgres_server")
    return PostgresPersistence(server.dsn, schema=request.getfixturevalue("pg_schema"))


def test_acquire_excludes_other_writers_until_released(
    backend: SessionPersistence, store: SessionStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    session = store.create(tmp_path)
    release = backend.acquire(session.header)
    assert store.list() == [], "acquire creates no transcript"
    with pytest.raises(SessionNotFoundError):
        backend.load(session.id)
    other = _second(backend, tmp_path, request)
    try:
        with pytest.raises(SessionLockedError, match=rf"session {session.id}"):
            other.acquire(session.header)
        with pytest.raises(SessionLockedError, match=rf"session {session.id}"):
            backend.acquire(session.header)  # another turn of this process
        backend.write(session.header, [SessionEvent(type="turn/start")])  # the holder writes
        release()
        release()  # idempotent
        other.acquire(session.header)()
        other.write(session.header, [SessionEvent(type="turn/end")])  # safe without a held lock
    finally:
        other.close()
    assert [e.type for e in backend.load(session.id).events] == ["turn/start", "turn/end"]


def test_a_turn_holds_the_lock_until_its_flush_and_sees_other_writers(
    backend: SessionPersistence, store: SessionStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first = store.create(tmp_path, lock=True)
    assert first.locked
    first.record("turn/start", turn_id=first.new_turn_id())
    first.flush()
    assert not first.locked
    other = _second(backend, tmp_path, request)
    try:
        other_store = SessionStore(lambda: other)
        a = store.resume(first.id)
        b = other_store.resume(first.id, lock=True)
        with pytest.raises(SessionLockedError):
            a.acquire()
        b.record("turn/start", turn_id=b.new_turn_id())
        b.flush()
        a.acquire()  # catches up with what b flushed
        turn_id = a.new_turn_id()
        a.record("turn/start", turn_id=turn_id)
        a.flush()
    finally:
        other.close()
    ids = [e.data["turn_id"] for e in store.resume(first.id).history]
    assert ids == [f"{first.id}:turn-1", f"{first.id}:turn-2", f"{first.id}:turn-3"]


def test_a_failed_flush_still_releases_the_lock(
    backend: SessionPersistence, store: SessionStore, tmp_path: Path
) -> None:
    session = store.create(tmp_path, lock=True)
    session.record("x", bad=object())
    with pytest.raises(PersistenceError):
        session.flush()
    assert not session.locked
    backend.acquire(session.header)()


def test_holding_keeps_the_lock_across_flushes(
    backend: SessionPersistence, store: SessionStore, tmp_path: Path
) -> None:
    session = store.create(tmp_path)
    with session.holding():
        for n in (1, 2):
            session.record("turn/start", turn_id=session.new_turn_id())
            session.flush()
            assert session.locked, f"released after flush {n}"
    assert not session.locked
    backend.acquire(session.header)()
    assert [e.data["turn_id"] for e in store.resume(session.id).history] == [
        f"{session.id}:turn-1",
        f"{session.id}:turn-2",
    ]


# -- the write-ahead record (begin) -------------------------------------------------------------


def _began(session_id: str, call_id: str, command: str) -> dict[str, object]:
    return {
        "call_id": call_id,
        "name": "bash",
        "arguments": {"command": command},
        "turn_id": f"{session_id}:turn-1",
    }


def test_a_command_that_began_is_stored_before_any_flush_and_read_back_with_its_outcome_unknown(
    backend: SessionPersistence, store: SessionStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert isinstance(backend, WriteAheadPersistence)
    session = store.create(tmp_path, lock=True)
    turn_id = session.new_turn_id()
    session.record("turn/start", turn_id=turn_id)
    session.record("tool/call", call_id="c1", name="bash", arguments={"command": "touch x"})
    session.begin("c1", name="bash", arguments={"command": "touch x"}, turn_id=turn_id)
    location = session.locate()
    if location is not None:  # the transcript stays lazy: the record sits beside it
        assert not os.path.lexists(location.path)
        assert os.path.isfile(location.path + ".began")
    session.release()  # the writer is killed here: its turn is never flushed
    other = _second(backend, tmp_path, request)
    try:
        found = other.unsettled(session.id)  # type: ignore[attr-defined]
        assert found is not None and found.header == session.header
        assert [(e.type, e.data) for e in found.events] == [("tool/began", _began(session.id, "c1", "touch x"))]
        with pytest.raises(SessionNotFoundError):
            other.load(session.id)
        other_store = SessionStore(lambda: other)
        assert [h.id for h in other_store.list()] == [session.id], "a session killed in its first turn is listed"
        resumed = other_store.resume(session.id, lock=True)
        assert [e.type for e in resumed.history] == ["tool/began"]
        assert resumed.new_turn_id() == f"{session.id}:turn-2", "the killed turn's number is not reused"
        resumed.record("turn/start", turn_id=resumed.new_turn_id())
        resumed.flush()  # the next checkpoint folds the record in, before its own events
        assert other.unsettled(session.id) is None  # type: ignore[attr-defined]
    finally:
        other.close()
    if location is not None:
        assert not os.path.lexists(location.path + ".began")
    stored = [(e.type, e.data) for e in backend.load(session.id).events]
    assert stored == [
        ("tool/began", _began(session.id, "c1", "touch x")),
        ("turn/start", {"turn_id": f"{session.id}:turn-2"}),
    ]
    assert [e.type for e in store.resume(session.id).history] == ["tool/began", "turn/start"]


def test_a_flush_that_holds_the_call_settles_its_record_and_keeps_the_others(
    backend: SessionPersistence, store: SessionStore, tmp_path: Path
) -> None:
    session = store.create(tmp_path, lock=True)
    turn_id = session.new_turn_id()
    session.record("turn/start", turn_id=turn_id)
    session.flush()
    session.acquire()
    session.record("tool/call", call_id="c2", name="bash", arguments={"command": "true"})
    session.begin("c2", name="bash", arguments={"command": "true"}, turn_id=turn_id)
    session.record("tool/result", call_id="c2", name="bash", output="", is_error=False, data={})
    session.flush()
    assert backend.unsettled(session.id) is None  # type: ignore[attr-defined]
    assert "tool/began" not in [e.type for e in backend.load(session.id).events]
    # A stored session, then a kill in its next turn: resume and show read the record after the history.
    session.acquire()
    session.begin("c3", name="bash", arguments={"command": "sleep 9"}, turn_id=turn_id)
    session.release()
    assert [e.type for e in store.resume(session.id).history] == [
        "turn/start",
        "tool/call",
        "tool/result",
        "tool/began",
    ]
