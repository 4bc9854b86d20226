"""The PostgreSQL backend against a real server: versions, the per-turn lock, faults, secrets."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL driver psycopg is not installed")

from dsh.persistence.postgres import SCHEMA_VERSION, PostgresPersistence  # noqa: E402
from dsh.session import (  # noqa: E402
    PersistenceError,
    SessionEvent,
    SessionHeader,
    SessionLockedError,
    SessionNotFoundError,
    SessionStore,
)


@pytest.fixture
def backend(postgres_server: Any, pg_schema: str) -> Iterator[PostgresPersistence]:
    made = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
    yield made
    made.close()


def _sql(server: Any, query: str, *params: Any) -> list[Any]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        cur = conn.execute(query, params or None)
        return cur.fetchall() if cur.description else []


def _header(session_id: str = "s1") -> SessionHeader:
    return SessionHeader(id=session_id, cwd="/w")


def test_first_write_creates_the_schema_at_the_current_version(
    backend: PostgresPersistence, postgres_server: Any, pg_schema: str
) -> None:
    assert backend.list() == []
    assert _sql(postgres_server, "SELECT to_regnamespace(%s)", pg_schema) == [(None,)], "a read created the schema"
    backend.write(_header(), [SessionEvent(type="turn/start")])
    rows = _sql(postgres_server, f"SELECT version, description FROM {pg_schema}.schema_version")
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
    assert backend.migrate() == (SCHEMA_VERSION, SCHEMA_VERSION)
    # One row per flush, and the events view answers per-event SQL.
    backend.write(_header(), [SessionEvent(type="tool/call", data={"name": "bash"})])
    assert _sql(
        postgres_server,
        f"SELECT flush, position, type, data ->> 'name' FROM {pg_schema}.events WHERE session_id = 's1' ORDER BY 1, 2",
    ) == [(0, 0, "turn/start", None), (1, 0, "tool/call", "bash")]


def test_text_json_cannot_hold_in_jsonb_round_trips(backend: PostgresPersistence) -> None:
    data = {"stdout": "nul \x00 byte, émoji 🐚, big 12345678901234567890", "f": 0.1}
    backend.write(_header(), [SessionEvent(type="tool/result", data=data)])
    assert backend.load("s1").events[0].data == data


def test_a_newer_schema_is_refused_and_never_written(
    backend: PostgresPersistence, postgres_server: Any, pg_schema: str
) -> None:
    backend.write(_header(), [SessionEvent(type="turn/start")])
    _sql(postgres_server, f"INSERT INTO {pg_schema}.schema_version (version, description) VALUES (99, 'future')")
    newer = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
    try:
        for attempt in (
            lambda: newer.write(_header("s2"), [SessionEvent(type="turn/start")]),
            lambda: newer.acquire(_header()),
            newer.list,
            lambda: newer.load("s1"),
            newer.migrate,
        ):
            with pytest.raises(PersistenceError) as info:
                attempt()
            message = str(info.value)
            assert "\n" not in message and "schema version 99" in message and "127.0.0.1" in message
            assert "upgrade dsh-persistence-postgres" in message
    finally:
        newer.close()
    assert _sql(postgres_server, f"SELECT count(*) FROM {pg_schema}.flushes") == [(1,)]
    assert _sql(postgres_server, f"SELECT count(*) FROM {pg_schema}.sessions") == [(1,)]


def test_acquire_serialises_two_hosts_and_names_the_holder(postgres_server: Any, pg_schema: str) -> None:
    host_a = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
    host_b = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
    try:
        release = host_a.acquire(_header())
        assert host_b.list() == [], "acquire wrote a session"
        with pytest.raises(SessionLockedError) as info:
            host_b.acquire(_header())
        message = str(info.value)
        assert "session s1" in message and "dsh " in message and "127.0.0.1" in message
        assert postgres_server.password not in message and "\n" not in message
        host_b.acquire(_header("s2"))()
        # The holder's flush goes through its locked connection.
        host_a.write(_header(), [SessionEvent(type="turn/start")])
        release()
        release()
        again = host_b.acquire(_header())
        host_b.write(_header(), [SessionEvent(type="turn/end")])
        again()
        assert [e.type for e in host_a.load("s1").events] == ["turn/start", "turn/end"]
    finally:
        host_a.close()
        host_b.close()


def test_a_closed_backend_drops_its_locks(postgres_server: Any, pg_schema: str) -> None:
    first = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
    first.acquire(_header())
    second = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
    with pytest.raises(SessionLockedError):
        second.acquire(_header())  # held by the first backend's connection
    first.close()
    second.acquire(_header())()  # closing dropped the advisory lock: no SessionLockedError now
    second.close()


def test_acquire_refuses_a_user_who_may_not_write(
    backend: PostgresPersistence, postgres_server: Any, pg_schema: str
) -> None:
    backend.migrate()
    role = f"reader_{pg_schema}"
    _sql(postgres_server, f"CREATE ROLE {role} LOGIN PASSWORD 'reader-pw'")
    _sql(postgres_server, f"GRANT USAGE ON SCHEMA {pg_schema} TO {role}")
    _sql(postgres_server, f"GRANT SELECT ON ALL TABLES IN SCHEMA {pg_schema} TO {role}")
    reader = PostgresPersistence(
        postgres_server.dsn_without_password().replace("user=dsh", f"user={role}") + " password=reader-pw",
        schema=pg_schema,
    )
    try:
        assert reader.list() == []
        with pytest.raises(PersistenceError, match=f"may not insert into {pg_schema}.flushes") as info:
            reader.acquire(_header())
        assert "reader-pw" not in str(info.value)
    finally:
        reader.close()


def test_a_wrong_password_is_one_line_naming_the_server_and_not_the_password(
    postgres_server: Any, pg_schema: str
) -> None:
    wrong = "not-the-Password-42"
    for dsn in (
        postgres_server.dsn_without_password() + f" password={wrong}",
        f"postgresql://dsh:{wrong}@127.0.0.1:{postgres_server.port}/postgres",
    ):
        backend = PostgresPersistence(dsn, schema=pg_schema)
        start = time.monotonic()
        for attempt in (backend.list, lambda b=backend: b.acquire(_header())):
            with pytest.raises(PersistenceError) as info:
                attempt()
            message = str(info.value)
            assert "\n" not in message and f"127.0.0.1:{postgres_server.port}" in message
            assert "password authentication failed" in message
            assert wrong not in message and wrong not in repr(backend)
        assert time.monotonic() - start < 30  # fails at once, not after the pool's patience
        backend.close()


def test_an_invalid_dsn_is_refused_without_echoing_it() -> None:
    with pytest.raises(PersistenceError, match="not a valid libpq connection string") as info:
        PostgresPersistence("host=x password=sekrit nonsense")
    assert "sekrit" not in str(info.value)
    with pytest.raises(PersistenceError, match="not a plain lower-case SQL identifier"):
        PostgresPersistence("", schema="Bad; DROP")


def test_server_going_away_mid_session_fails_the_flush_then_the_next_turn_reconnects(
    postgres_server: Any, pg_schema: str
) -> None:
    backend = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
    store = SessionStore(lambda: backend)
    session = store.create("/w")
    try:
        release = backend.acquire(session.header)
        session.record("turn/start", turn_id="t1")
        session.flush()
        release()
        # Turn 2 starts, then the server goes away before its flush.
        release = backend.acquire(session.header)
        session.record("turn/start", turn_id="t2")
        postgres_server.stop("fast")
        try:
            with pytest.raises(PersistenceError) as info:
                session.flush()
            message = str(info.value)
            assert "\n" not in message and "127.0.0.1" in message and f"writing session {session.id}" in message
            assert postgres_server.password not in message
            release()
            with pytest.raises(PersistenceError, match=r"127\.0\.0\.1"):
                backend.acquire(session.header)  # still down: one line at once
        finally:
            postgres_server.start()
        # The next turn reconnects; the unflushed events go with it and nothing committed is lost.
        release = backend.acquire(session.header)
        session.flush()
        release()
        assert [e.data["turn_id"] for e in backend.load(session.id).events] == ["t1", "t2"]
        assert [h.id for h in backend.list()] == [session.id]
    finally:
        backend.close()


def test_the_password_never_reaches_repr_or_errors(postgres_server: Any, pg_schema: str) -> None:
    backend = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
    assert postgres_server.password not in repr(backend) and postgres_server.password not in backend.where
    backend.close()


def test_hosts_starting_together_migrate_once(postgres_server: Any, pg_schema: str) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from dsh.persistence.postgres import PostgresPersistence as P;"
        "print(P(sys.argv[1], schema=sys.argv[2]).migrate())"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, postgres_server.dsn, pg_schema],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [err for _, err in outputs]
    # Exactly one of them found the schema missing; the others waited and found it done.
    assert (
        sorted(out.strip() for out, _ in outputs)
        == [f"(0, {SCHEMA_VERSION})"] + [f"({SCHEMA_VERSION}, {SCHEMA_VERSION})"] * 7
    )
    rows = _sql(postgres_server, f"SELECT version FROM {pg_schema}.schema_version ORDER BY 1")
    assert rows == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


def test_more_turns_than_pooled_connections_is_a_clear_error(postgres_server: Any, pg_schema: str) -> None:
    backend = PostgresPersistence(
        postgres_server.dsn, schema=pg_schema, pool_min_size=1, pool_max_size=1, connect_timeout=1
    )
    try:
        release = backend.acquire(_header("a"))
        with pytest.raises(PersistenceError, match=r"no free connection after 1 s \(raise pool_max_size\)"):
            backend.acquire(_header("b"))
        release()
        backend.acquire(_header("b"))()  # the pool was kept: the held turn's connection came back
    finally:
        backend.close()


def test_resume_reads_only_the_newest_flushes(
    backend: PostgresPersistence, postgres_server: Any, pg_schema: str
) -> None:
    store = SessionStore(lambda: backend)
    session = store.create("/w")
    for _ in range(6):  # more flushes than one page of the tail's query
        session.acquire()
        turn_id = session.new_turn_id()
        session.record("turn/start", turn_id=turn_id)
        session.record("turn/end", turn_id=turn_id)
        session.flush()
    for _ in range(5):  # flushes without a turn are passed over on the way back
        backend.write(session.header, [SessionEvent(type="hook/result")])
    # Damage the oldest flush: a tail never reads it, a whole load names it.
    _sql(postgres_server, f"UPDATE {pg_schema}.flushes SET events = '{{\"x\": 1}}' WHERE seq = 0")
    tail = backend.tail(session.id)
    assert tail is not None and tail.last_turn == 6 and tail.header == session.header
    resumed = store.resume(session.id, lock=True, history=False)
    assert resumed.new_turn_id() == f"{session.id}:turn-7"
    resumed.release()
    with pytest.raises(PersistenceError, match=f"session {session.id} in schema {pg_schema} is damaged") as err:
        backend.load(session.id)
    assert err.value.session_id == session.id
    with pytest.raises(SessionNotFoundError):
        backend.tail("missing")


class _LossyProxy:
    """A loopback TCP proxy to the server that can lose the reply to a flush after the server committed it.

    Armed, the first connection that sends an ``INSERT`` has the server's reply to it dropped and
    both sides closed, as a network failing right after the commit would. ``refuse`` closes new
    connections at once, as a server that cannot be reached for a while.
    """

    def __init__(self, port: int) -> None:
        import socket
        import threading

        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.armed = threading.Event()
        self.refuse = threading.Event()
        self.dropped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self, server: Any) -> str:
        return str(server.dsn).replace(f"port={server.port}", f"port={self.port}")

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refuse.is_set():
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self._target))
            doomed = threading.Event()
            threading.Thread(target=self._pump, args=(client, upstream, doomed, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, doomed, False), daemon=True).start()

    def _pump(self, src: Any, dst: Any, doomed: Any, to_server: bool) -> None:
        import socket

        try:
            while data := src.recv(65536):
                if to_server and self.armed.is_set() and b"INSERT INTO" in data:
                    self.armed.clear()
                    doomed.set()
                elif not to_server and doomed.is_set():
                    self.dropped.set()  # the server answered (it committed): the answer is lost
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._listener.close()


def _stored_turns(server: Any, schema: str, session_id: str) -> list[str]:
    rows = _sql(
        server,
        f"SELECT data ->> 'turn_id' FROM {schema}.events WHERE session_id = %s AND type = 'turn/start' ORDER BY flush",
        session_id,
    )
    return [turn for (turn,) in rows]


def test_a_flush_whose_commit_reply_is_lost_is_stored_once_and_reported_saved(
    postgres_server: Any, pg_schema: str
) -> None:
    proxy = _LossyProxy(postgres_server.port)
    backend = PostgresPersistence(proxy.dsn(postgres_server), schema=pg_schema)
    store = SessionStore(lambda: backend)
    session = store.create("/w")
    try:
        session.record("turn/start", turn_id="t1")
        session.flush()
        release = backend.acquire(session.header)
        session.record("turn/start", turn_id="t2")
        proxy.armed.set()
        session.flush()  # the reply is lost, the flush id is found on a new connection: saved
        release()
        assert proxy.dropped.is_set() and session.pending == []
        # The session's end (a SessionEnd hook's record) flushes again: t2 is not written twice.
        session.record("session/end")
        session.flush()
        assert _stored_turns(postgres_server, pg_schema, session.id) == ["t1", "t2"]
    finally:
        backend.close()
        proxy.close()


def test_an_unconfirmed_flush_is_settled_by_the_next_flush_never_stored_twice(
    postgres_server: Any, pg_schema: str
) -> None:
    from dsh.session import FlushUnconfirmedError

    proxy = _LossyProxy(postgres_server.port)
    backend = PostgresPersistence(proxy.dsn(postgres_server), schema=pg_schema, connect_timeout=1)
    store = SessionStore(lambda: backend)
    session = store.create("/w")
    try:
        session.record("turn/start", turn_id="t1")
        session.flush()
        release = backend.acquire(session.header)
        session.record("turn/start", turn_id="t2")
        proxy.armed.set()
        proxy.refuse.set()  # and the server cannot be asked whether it committed
        with pytest.raises(FlushUnconfirmedError) as info:
            session.flush()
        release()
        message = str(info.value)
        assert "\n" not in message and f"writing session {session.id} is unconfirmed" in message
        assert "may have been stored" in message and postgres_server.password not in message
        assert [e.data.get("turn_id") for e in session.pending] == ["t2"]  # kept, as after any failure
        proxy.refuse.clear()
        session.record("session/end")
        session.flush()  # looks the flush id up: t2 is there, so only session/end is written
        assert _stored_turns(postgres_server, pg_schema, session.id) == ["t1", "t2"]
        assert [e.type for e in backend.load(session.id).events] == ["turn/start", "turn/start", "session/end"]
    finally:
        backend.close()
        proxy.close()


def test_a_role_that_may_not_create_the_schema_is_told_to_run_sessions_migrate(
    postgres_server: Any, pg_schema: str
) -> None:
    role = f"host_{pg_schema}"
    _sql(postgres_server, f"CREATE ROLE {role} LOGIN PASSWORD 'host-pw'")  # CONNECT only, as a fleet host's
    host = PostgresPersistence(
        postgres_server.dsn_without_password().replace("user=dsh", f"user={role}") + " password=host-pw",
        schema=pg_schema,
    )
    try:
        with pytest.raises(PersistenceError) as info:
            host.write(_header(), [SessionEvent(type="turn/start")])
        message = str(info.value)
        assert "\n" not in message and "host-pw" not in message
        assert f"bringing schema {pg_schema} from version 0 to {SCHEMA_VERSION} failed: permission denied" in message
        assert message.endswith(
            f"role {role} may not change it: run `dsh sessions migrate` once as a role that may "
            "(one with CREATE on database postgres, or the schema's owner)"
        )
        # Done once by a role that may, the host writes with only USAGE, SELECT and INSERT.
        admin = PostgresPersistence(postgres_server.dsn, schema=pg_schema)
        admin.migrate()
        admin.close()
        _sql(postgres_server, f"GRANT USAGE ON SCHEMA {pg_schema} TO {role}")
        _sql(postgres_server, f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {pg_schema} TO {role}")
        host.write(_header(), [SessionEvent(type="turn/start")])
    finally:
        host.close()


def test_a_pool_whose_minimum_exceeds_its_maximum_is_refused_naming_the_field() -> None:
    from dsh.core import FieldError
    from dsh.persistence.postgres import PostgresConfig

    with pytest.raises(FieldError, match=r"^field 'pool_min_size' must not exceed pool_max_size \(2\)$") as err:
        PostgresConfig(pool_min_size=5, pool_max_size=2)
    assert err.value.field == "pool_min_size"


def test_acquire_refuses_a_user_who_may_write_flushes_but_not_the_records_of_commands(
    backend: PostgresPersistence, postgres_server: Any, pg_schema: str
) -> None:
    backend.migrate()
    role = f"flusher_{pg_schema}"
    _sql(postgres_server, f"CREATE ROLE {role} LOGIN PASSWORD 'flusher-pw'")
    _sql(postgres_server, f"GRANT USAGE ON SCHEMA {pg_schema} TO {role}")
    _sql(postgres_server, f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {pg_schema} TO {role}")
    _sql(postgres_server, f"REVOKE INSERT ON {pg_schema}.began FROM {role}")
    flusher = PostgresPersistence(
        postgres_server.dsn_without_password().replace("user=dsh", f"user={role}") + " password=flusher-pw",
        schema=pg_schema,
    )
    try:
        with pytest.raises(PersistenceError, match=f"may not insert into and delete from {pg_schema}.began"):
            flusher.acquire(_header())  # refused before any command could run unrecorded
    finally:
        flusher.close()


def test_errors_name_the_server_a_dsn_reaches_and_never_its_password() -> None:
    from dsh.persistence.postgres._database import Database

    def where(dsn: str, env: dict[str, str]) -> str:
        options: dict[str, Any] = {"pool_min_size": 1, "pool_max_size": 2, "statement_timeout": None}
        return Database(dsn, schema="dsh", connect_timeout=1, env=env, **options).where

    assert where("dbname=dsh password=hunter2", {}) == "PostgreSQL on the local socket (port 5432) database dsh"
    assert where("", {"PGPORT": "6543", "PGUSER": "me"}) == "PostgreSQL on the local socket (port 6543) database me"
    assert where("postgresql://me:hunter2@db.example:5433/app", {}) == "PostgreSQL db.example:5433 database app"
