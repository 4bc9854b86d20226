"""The PostgreSQL backend: the per-turn advisory lock, flushes, loads, tails and lists."""

from __future__ import annotations

import contextlib
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from dsh.session import (
    FlushUnconfirmedError,
    PersistenceError,
    SessionEvent,
    SessionFormatError,
    SessionHeader,
    SessionLocation,
    SessionLockedError,
    SessionNotFoundError,
    validate_session_id,
)
from dsh.session.persistence import (
    SessionScan,
    SessionTail,
    StoredSession,
    batch_last_turn,
    decode_batch,
    decode_records,
    encode_batch,
    not_settled,
)

from ._database import Database
from ._lock import holder, try_lock, unlock
from ._schema import lock_key

_TAIL_PAGE = 4
"""Flushes read per query while looking for the last turn, newest first (one is usually enough)."""


class PostgresPersistence:
    """All sessions of a fleet in one PostgreSQL schema.

    Constructing connects nothing. :meth:`check` (the plugin calls it at boot) and the first use
    connect once directly, so a wrong DSN or password is one clear error at once; the first use
    also migrates the schema, then opens the pool. Every failure is a :class:`PersistenceError` of
    one line naming the server (never the password) and the session when it is one session's.

    Before a command starts, :meth:`begin` commits a row to ``began`` (the write-ahead record);
    the session's next flush folds the rows its events do not settle into its own row and deletes
    them all, in the same statement.
    """

    def __init__(
        self,
        dsn: str = "",
        *,
        schema: str = "dsh",
        pool_min_size: int = 1,
        pool_max_size: int = 4,
        statement_timeout: float | None = 30.0,
        connect_timeout: float = 10.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._db = Database(
            dsn,
            schema=schema,
            pool_min_size=pool_min_size,
            pool_max_size=pool_max_size,
            statement_timeout=statement_timeout,
            connect_timeout=connect_timeout,
            env=env,
        )
        self.where = self._db.where
        """The server and database, as errors name them (never the password)."""
        self.schema = schema
        self._ident = self._db.ident
        self._host = socket.gethostname()
        self._held: dict[str, psycopg.Connection[Any]] = {}
        self._known: set[str] = set()
        self._unsure: dict[str, tuple[str, int, str]] = {}
        """Per session, the flush id, event count and encoded events of a flush whose commit went unconfirmed."""

    def __repr__(self) -> str:
        return f"PostgresPersistence({self.where}, schema={self.schema!r})"

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        """Always None: rows in a shared database are no per-session file."""
        return None

    def check(self) -> None:
        """Connect once and check the schema version, so a wrong DSN or password, an unreachable server
        or a newer schema is one clear error before anything runs. Creates no schema; opens no pool."""
        self._db.check()

    def migrate(self) -> tuple[int, int]:
        """Create the schema if needed and bring it to :data:`SCHEMA_VERSION`; return (before, after).

        Idempotent; the first use of a backend does the same. Refuses a newer schema, writing nothing.
        """
        return self._db.migrate()

    # -- the turn lock --------------------------------------------------------------------------

    def acquire(self, header: SessionHeader) -> Callable[[], None]:
        """Take the session's advisory lock on a connection kept for the turn; check writes are allowed.

        Raise :class:`SessionLockedError` naming the session and the holder's host and process,
        :class:`PersistenceError` naming the server when it cannot be reached or written. Writes
        nothing; the returned release function is idempotent.
        """
        session_id = validate_session_id(header.id)
        key = lock_key(f"dsh session {self.schema} {session_id}")
        doing = f"locking session {session_id}"
        pool, conn, row = try_lock(self._db, doing, key, session_id)
        got, standby, read_only, may_insert, may_record = row
        problem = None
        if not got:
            who = holder(conn, key)
            pool.putconn(conn)
            raise SessionLockedError(
                self._db.redact(
                    f"session {session_id} is being written by {who} on {self.where}; {SessionLockedError.REMEDY}"
                ),
                session_id=session_id,
            )
        if standby or read_only == "on":
            problem = "the server is read-only (a standby, or default_transaction_read_only is on)"
        elif not may_insert:
            problem = f"this user may not insert into {self.schema}.flushes"
        elif not may_record:
            problem = (
                f"this user may not insert into and delete from {self.schema}.began (each command's record "
                "that it began); grant both"
            )
        if problem:
            unlock(conn, key)
            pool.putconn(conn)
            raise self._db.error(f"checking that session {session_id} can be written", problem, session_id)
        with self._db.lock:
            self._held[session_id] = conn
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            with self._db.lock:
                if self._held.get(session_id) is conn:
                    del self._held[session_id]
            unlock(conn, key)
            if self._db.pool is pool:
                pool.putconn(conn)
            else:  # the backend was closed meanwhile
                conn.close()

        return release

    # -- writing --------------------------------------------------------------------------------

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Insert the header (first time) and ``events`` as one flush row: one statement, one transaction.

        Each flush row carries a fresh flush id. When the connection breaks with the statement in
        flight (its commit may have happened and only the reply been lost), the flush id is looked
        up on a new connection: found, the write succeeded; not found, it failed. When even that
        cannot be learnt, :class:`FlushUnconfirmedError` is raised and the next write of the session
        (the session retries the same events first) looks again before storing them: never twice.
        """
        doing = f"writing session {header.id}"
        with self._db.lock:
            held = self._held.get(header.id)
        if held is not None and not held.closed:
            self._write_on(held, header, events, doing)
            return
        with self._db.connection(doing, create=True, session_id=header.id) as conn:
            assert conn is not None
            self._write_on(conn, header, events, doing)

    def _stored(self, conn: psycopg.Connection[Any], session_id: str, flush_id: str) -> bool:
        row = conn.execute(
            sql.SQL("SELECT 1 FROM {}.flushes WHERE session_id = %s AND flush_id = %s").format(self._ident),
            (session_id, flush_id),
        ).fetchone()
        return row is not None

    def _confirm(self, session_id: str, flush_id: str, backend_pid: int | None) -> bool | None:
        """Whether the flush ``flush_id`` sent on a connection that broke was stored; None if that cannot be learnt.

        Asked on a new connection, once the server process of the broken one is idle or gone (a
        commit still under way there could land after the look-up), within ``connect_timeout``.
        """
        try:
            conn = self._db.connect_direct(f"confirming the flush of session {session_id}", session_id)
        except PersistenceError:
            return None
        try:
            deadline = time.monotonic() + self._db.connect_timeout
            while backend_pid is not None:
                row = conn.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (backend_pid,)).fetchone()
                if row is None or row[0] not in ("active", "idle in transaction"):
                    break
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.05)
            return self._stored(conn, session_id, flush_id)
        except psycopg.Error:
            return None
        finally:
            conn.close()

    def _write_on(
        self, conn: psycopg.Connection[Any], header: SessionHeader, events: Sequence[SessionEvent], doing: str
    ) -> None:
        sid = header.id
        with self._db.lock:
            unsure = self._unsure.get(sid)
        if unsure is not None:
            # The last flush of this session went unconfirmed; the session retries its events first.
            flush_id, count, sent = unsure
            try:
                stored = self._stored(conn, sid, flush_id)
            except psycopg.Error as exc:
                if isinstance(exc, psycopg.OperationalError):
                    self._db.drop_pool()
                raise self._db.error(doing, exc, sid) from None
            if stored and encode_batch(sid, events[:count]) == sent:
                events = events[count:]
                self._known.add(sid)
            with self._db.lock:
                self._unsure.pop(sid, None)
            if not events:
                return
        batch = encode_batch(sid, events)  # what a retry after an unconfirmed commit compares
        try:
            began, folded = self._folded(conn, sid, events)
        except psycopg.Error as exc:
            raise self._db.error(doing, exc, sid) from None
        flush_id = secrets.token_hex(16)
        flush = sql.SQL(
            "INSERT INTO {s}.flushes (session_id, seq, events, host, flush_id) VALUES (%(id)s,"
            " (SELECT COALESCE(MAX(seq) + 1, 0) FROM {s}.flushes WHERE session_id = %(id)s), %(events)s, %(host)s,"
            " %(flush_id)s)"
        ).format(s=self._ident)
        params: dict[str, Any] = {"id": sid, "events": folded or batch, "host": self._host, "flush_id": flush_id}
        backend_pid = conn.info.backend_pid or None  # the server process, to wait for if the connection breaks
        ctes: list[sql.Composable] = []
        if header.id not in self._known:
            # The header rides in the same statement: the first flush publishes both or neither.
            ctes.append(
                sql.SQL(
                    "header AS (INSERT INTO {s}.sessions (id, created_at, header)"
                    " VALUES (%(id)s, %(created_at)s, %(header)s) ON CONFLICT (id) DO NOTHING)"
                ).format(s=self._ident)
            )
            params.update(created_at=header.created_at, header=header.to_json())
        if began:
            # The write-ahead rows this flush settles go in the same statement: both or neither.
            ctes.append(
                sql.SQL(
                    "settled AS (DELETE FROM {s}.began WHERE session_id = %(id)s AND call_id = ANY(%(began)s))"
                ).format(s=self._ident)
            )
            params["began"] = began
        if ctes:
            flush = sql.SQL("WITH ") + sql.SQL(", ").join(ctes) + sql.SQL(" ") + flush
        for attempt in (1, 2):
            try:
                conn.execute(flush, params)
                break
            except psycopg.errors.UniqueViolation:
                # Another writer took this sequence number between our read and insert: once more.
                if attempt == 2:
                    raise self._db.error(doing, "another writer keeps taking the same flush number", sid) from None
            except psycopg.OperationalError as exc:
                # The connection broke: the statement may have committed with only its reply lost.
                self._db.drop_pool()
                confirmed = self._confirm(sid, flush_id, backend_pid)
                if confirmed:
                    break
                if confirmed is None:
                    with self._db.lock:
                        self._unsure[sid] = (flush_id, len(events), batch)
                    raise FlushUnconfirmedError(
                        self._db.redact(
                            f"{self.where}: writing session {sid} is unconfirmed: {exc}; the flush may have been "
                            f"stored (flush id {flush_id}): the next flush looks it up and never stores it twice"
                        ),
                        session_id=sid,
                    ) from None
                raise self._db.error(doing, exc, sid) from None
            except psycopg.Error as exc:
                raise self._db.error(doing, exc, sid) from None
        self._known.add(sid)

    # -- the write-ahead record -----------------------------------------------------------------

    def begin(self, header: SessionHeader, event: SessionEvent) -> None:
        """Commit ``event`` as the session's ``began`` row for its call (on the turn's connection when held)."""
        sid = header.id
        doing = f"recording that a command of session {sid} began"
        statement = sql.SQL(
            "INSERT INTO {}.began (session_id, call_id, created_at, header, event) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (session_id, call_id) DO UPDATE SET event = EXCLUDED.event"
        ).format(self._ident)
        params = (sid, str(event.data.get("call_id")), header.created_at, header.to_json(), encode_batch(sid, (event,)))
        with self._db.lock:
            held = self._held.get(sid)
        try:
            if held is not None and not held.closed:
                held.execute(statement, params)  # autocommit: committed when it returns
                return
            with self._db.connection(doing, create=True, session_id=sid) as conn:
                assert conn is not None
                conn.execute(statement, params)
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                self._db.drop_pool()
            raise self._db.error(doing, exc, sid) from None

    def unsettled(self, session_id: str) -> StoredSession | None:
        """The session's ``began`` rows, oldest first, with the header they were made under."""
        validate_session_id(session_id)

        def work(conn: psycopg.Connection[Any] | None) -> list[Any]:
            if conn is None:
                return []
            return conn.execute(
                sql.SQL(
                    "SELECT header::text, event::text FROM {}.began WHERE session_id = %s ORDER BY at, call_id"
                ).format(self._ident),
                (session_id,),
            ).fetchall()

        rows = self._db.retrying(f"reading session {session_id}", False, work, session_id)
        if not rows:
            return None
        try:
            return decode_records(rows)
        except SessionFormatError as exc:
            raise self._damaged(session_id, exc) from None

    def _folded(
        self, conn: psycopg.Connection[Any], session_id: str, events: Sequence[SessionEvent]
    ) -> tuple[list[str], str | None]:
        """The session's ``began`` rows a flush of ``events`` settles, and the flush re-encoded with
        those it does not hold first (None when it holds them all)."""
        rows = conn.execute(
            sql.SQL("SELECT call_id, event::text FROM {}.began WHERE session_id = %s ORDER BY at, call_id").format(
                self._ident
            ),
            (session_id,),
        ).fetchall()
        if not rows:
            return [], None
        try:
            records = [e for _, batch in rows for e in decode_batch(batch)]
        except SessionFormatError as exc:
            raise self._damaged(session_id, exc) from None
        left = not_settled(records, events)
        return [call_id for call_id, _ in rows], encode_batch(session_id, [*left, *events]) if left else None

    # -- reading --------------------------------------------------------------------------------

    def _not_found(self, session_id: str) -> SessionNotFoundError:
        return SessionNotFoundError(
            f"no session {session_id} in {self.where} schema {self.schema}", session_id=session_id
        )

    def _damaged(self, session_id: str, exc: SessionFormatError) -> PersistenceError:
        return PersistenceError(
            f"{self.where}: session {session_id} in schema {self.schema} is damaged: {exc.problem}",
            session_id=session_id,
        )

    def _header(self, conn: psycopg.Connection[Any], session_id: str) -> str | None:
        row = conn.execute(
            sql.SQL("SELECT header::text FROM {}.sessions WHERE id = %s").format(self._ident), (session_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    def load(self, session_id: str) -> StoredSession:
        """Read one session's header and events in order."""
        validate_session_id(session_id)

        def work(conn: psycopg.Connection[Any] | None) -> tuple[str | None, list[Any]]:
            if conn is None:
                return None, []
            # Two statements, no transaction: the header never changes, and a flush committed in
            # between is simply included (flushes are only ever appended).
            header = self._header(conn, session_id)
            batches = conn.execute(
                sql.SQL("SELECT events::text FROM {}.flushes WHERE session_id = %s ORDER BY seq").format(self._ident),
                (session_id,),
            ).fetchall()
            return header, batches

        text, batches = self._db.retrying(f"reading session {session_id}", False, work, session_id)
        if text is None:
            raise self._not_found(session_id)
        try:
            header = SessionHeader.from_json(text)
            events = tuple(event for (batch,) in batches for event in decode_batch(batch))
        except SessionFormatError as exc:
            raise self._damaged(session_id, exc) from None
        return StoredSession(header, events)

    def tail(self, session_id: str) -> SessionTail | None:
        """Header and last turn number, reading flushes newest first only until one holds a ``turn/start``.

        Costs the same at any length of history (a flush is one turn). None when that event cannot
        be read: the store then loads the session whole, which reports the damage.
        """
        validate_session_id(session_id)
        page = sql.SQL(
            "SELECT seq, events::text FROM {}.flushes WHERE session_id = %s AND seq < %s ORDER BY seq DESC LIMIT %s"
        ).format(self._ident)

        def work(conn: psycopg.Connection[Any] | None) -> tuple[str | None, int | None]:
            if conn is None:
                return None, 0
            header = self._header(conn, session_id)
            if header is None:
                return None, 0
            before = 2**31  # flush numbers are PostgreSQL integers
            while True:
                rows = conn.execute(page, (session_id, before, _TAIL_PAGE)).fetchall()
                for seq, batch in rows:
                    try:
                        turn = batch_last_turn(batch)
                    except SessionFormatError:
                        return header, None
                    if turn is not None:
                        return header, turn
                    before = seq
                if len(rows) < _TAIL_PAGE:
                    return header, 0

        text, turn = self._db.retrying(f"reading session {session_id}", False, work, session_id)
        if text is None:
            raise self._not_found(session_id)
        try:
            header = SessionHeader.from_json(text)
        except SessionFormatError as exc:
            raise self._damaged(session_id, exc) from None
        return None if turn is None else SessionTail(header, turn)

    def list(self) -> list[SessionHeader]:
        """Every readable stored header, oldest first (see :meth:`scan`)."""
        return list(self.scan().headers)

    def scan(self) -> SessionScan:
        """Every readable stored header, oldest first, and one line per session whose header is damaged."""

        def work(conn: psycopg.Connection[Any] | None) -> list[Any]:
            if conn is None:
                return []
            return conn.execute(
                # A session killed in its first turn has only its write-ahead rows: listed by them.
                sql.SQL(
                    "SELECT id, header::text, created_at FROM {s}.sessions UNION ALL"
                    " SELECT session_id, MIN(header::text), MIN(created_at) FROM {s}.began"
                    " WHERE session_id NOT IN (SELECT id FROM {s}.sessions) GROUP BY session_id ORDER BY 3, 1"
                ).format(s=self._ident)
            ).fetchall()

        headers, damaged = [], []
        rows = self._db.retrying("listing sessions", False, work)
        from_json = SessionHeader.from_json
        for session_id, text, _ in rows:
            try:
                headers.append(from_json(text))
            except SessionFormatError as exc:
                damaged.append(f"{self.where}: the header of session {session_id} is damaged: {exc.problem}")
        return SessionScan(tuple(headers), tuple(damaged))

    def close(self) -> None:
        """Release held locks and close the pool."""
        with self._db.lock:
            held, self._held = list(self._held.values()), {}
            pool, self._db.pool = self._db.pool, None
            self._known.clear()
        for conn in held:
            # The server drops a closed connection's locks only once it notices the close: unlock
            # first, so the locks are free when close() returns.
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock_all()")
            conn.close()
        if pool is not None:
            pool.close()
