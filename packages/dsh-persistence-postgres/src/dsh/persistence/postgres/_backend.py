"""The PostgreSQL backend: schema migrations, the per-turn advisory lock, flushes, loads and lists."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import orjson
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from dsh.session import (
    PersistenceError,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    SessionLockedError,
    SessionNotFoundError,
    SessionScan,
    StoredSession,
    storable,
    validate_session_id,
)

T = TypeVar("T")

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "sessions, flushes and the events view",
        """
        CREATE TABLE IF NOT EXISTS {schema}.sessions (
            id text PRIMARY KEY,
            created_at text NOT NULL,
            header jsonb NOT NULL
        );
        CREATE INDEX IF NOT EXISTS sessions_by_creation ON {schema}.sessions (created_at, id);
        CREATE TABLE IF NOT EXISTS {schema}.flushes (
            session_id text NOT NULL REFERENCES {schema}.sessions (id),
            seq integer NOT NULL,
            events json NOT NULL,
            host text NOT NULL DEFAULT '',
            written_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (session_id, seq)
        );
        CREATE OR REPLACE VIEW {schema}.events AS
            SELECT f.session_id, f.seq AS flush, (e.n - 1)::integer AS position,
                   e.value ->> 'type' AS type, e.value ->> 'at' AS at, e.value -> 'data' AS data
            FROM {schema}.flushes AS f, json_array_elements(f.events) WITH ORDINALITY AS e (value, n);
        """,
    ),
)
"""Ordered schema migrations: version N is ``MIGRATIONS[N - 1]``, run with ``{schema}`` bound to the
configured schema. Each is idempotent and applied once, in order, in one transaction with its
``schema_version`` row, under an advisory lock so hosts starting together migrate once. Never edit
a released step: append a new one."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes."""

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now(),
    description text NOT NULL
);
"""


def _lock_key(text: str) -> int:
    """A signed 64-bit advisory lock key for ``text`` (the same on every host)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class PostgresPersistence:
    """All sessions of a fleet in one PostgreSQL schema.

    Constructing connects nothing. :meth:`check` (the plugin calls it at boot) and the first use
    connect once directly, so a wrong DSN or password is one clear error at once; the first use
    also migrates the schema, then opens the pool. Every failure is a :class:`PersistenceError` of
    one line naming the server (never the password).
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
        environ = os.environ if env is None else env
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise PersistenceError(f"PostgreSQL schema {schema!r} is not a plain lower-case SQL identifier")
        try:
            params: dict[str, Any] = conninfo_to_dict(dsn)
        except psycopg.Error:
            # libpq's message quotes the string, which may hold a password: say only what is wrong.
            raise PersistenceError(
                "the postgres backend's dsn is not a valid libpq connection string or postgresql:// URL"
            ) from None
        self._secrets = [s for s in (params.get("password"), environ.get("PGPASSWORD")) if s]
        extra: dict[str, Any] = {"fallback_application_name": f"dsh {socket.gethostname()} pid {os.getpid()}"[:63]}
        if "connect_timeout" not in params and "PGCONNECT_TIMEOUT" not in environ:
            extra["connect_timeout"] = max(1, round(connect_timeout))
        self._conninfo = make_conninfo(dsn, **extra)
        host = params.get("host") or params.get("hostaddr") or environ.get("PGHOST") or "the local socket"
        port = params.get("port") or environ.get("PGPORT") or "5432"
        dbname = params.get("dbname") or environ.get("PGDATABASE") or params.get("user") or environ.get("PGUSER")
        self.where = f"PostgreSQL {host}:{port}" + (f" database {dbname}" if dbname else "")
        """The server and database, as errors name them (never the password)."""
        self.schema = schema
        self.pool_min_size = pool_min_size
        self.pool_max_size = pool_max_size
        self.statement_timeout = statement_timeout
        self.connect_timeout = connect_timeout
        self._ident = sql.Identifier(schema)
        self._host = socket.gethostname()
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._version: int | None = None
        self._probed = False  # a direct connection just succeeded: the next pool needs no probe
        self._lock = threading.Lock()
        self._held: dict[str, psycopg.Connection[Any]] = {}
        self._known: set[str] = set()

    def __repr__(self) -> str:
        return f"PostgresPersistence({self.where}, schema={self.schema!r})"

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        """Always None: rows in a shared database are no per-session file."""
        return None

    # -- errors and connections ---------------------------------------------------------------

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return _one_line(text)

    def _error(self, doing: str, exc: BaseException | str) -> PersistenceError:
        reason = str(exc).removeprefix("connection failed: ")
        return PersistenceError(self._redact(f"{self.where}: {doing} failed: {reason}"))

    def _connect_direct(self, doing: str) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise self._error(doing, exc) from None

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        if self.statement_timeout is not None:
            conn.execute(sql.SQL("SET statement_timeout = {}").format(int(self.statement_timeout * 1000)))

    def _ready(self, create: bool) -> ConnectionPool[psycopg.Connection[Any]] | None:
        """The pool, after checking (and, when ``create`` or already versioned, migrating) the schema.

        None when the schema does not exist and ``create`` is false: nothing is stored yet.
        """
        with self._lock:
            if self._pool is not None and self._version == SCHEMA_VERSION:
                return self._pool
            probed, self._probed = self._probed, False
            if self._version is None or self._version < SCHEMA_VERSION:
                probed = True
                self._version = self._versioned(create)
                if self._version < SCHEMA_VERSION:
                    return None
            if self._pool is None:
                if not probed:
                    # A pool waits out its timeout when the server is down; a direct attempt says why at once.
                    self._connect_direct("connecting").close()
                pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                    self._conninfo,
                    kwargs={"autocommit": True},
                    min_size=self.pool_min_size,
                    max_size=self.pool_max_size,
                    configure=self._configure,
                    timeout=self.connect_timeout,
                    name=f"dsh-{self.schema}",
                    open=False,
                )
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    def _versioned(self, create: bool) -> int:
        """Connect directly, read the schema version and migrate an older one (a missing one only
        when ``create``); return the version now stored."""
        conn = self._connect_direct("connecting")
        try:
            self._configure(conn)
            version = self._check_version(conn)
            if version < SCHEMA_VERSION and (create or version > 0):
                self._migrate(conn)
                version = SCHEMA_VERSION
        except psycopg.Error as exc:
            raise self._error("checking the schema version", exc) from None
        finally:
            conn.close()
        return version

    def check(self) -> None:
        """Connect once and check the schema version, so a wrong DSN or password, an unreachable server
        or a newer schema is one clear error before anything runs. Creates no schema; opens no pool."""
        with self._lock:
            if self._version is None or self._version < SCHEMA_VERSION:
                self._version = self._versioned(create=False)
                self._probed = True

    def _check_version(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{self.schema}.schema_version",)).fetchone()
        version = 0
        if row and row[0]:
            got = conn.execute(
                sql.SQL("SELECT COALESCE(MAX(version), 0) FROM {}.schema_version").format(self._ident)
            ).fetchone()
            version = int(got[0]) if got else 0
        if version > SCHEMA_VERSION:
            raise PersistenceError(
                f"{self.where}: schema {self.schema} has dsh schema version {version}, newer than the "
                f"{SCHEMA_VERSION} this dsh-persistence-postgres knows; upgrade dsh-persistence-postgres on "
                "this host (nothing was written)"
            )
        return version

    def _migrate(self, conn: psycopg.Connection[Any]) -> tuple[int, int]:
        before = self._check_version(conn)
        if before == SCHEMA_VERSION:
            return before, before
        # Hosts starting together migrate one at a time. The lock is taken before the transaction
        # begins, so the transaction's catalog lookups see what the previous holder committed.
        key = _lock_key(f"dsh schema {self.schema}")
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            current = self._migrate_locked(conn)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return current, SCHEMA_VERSION

    def _migrate_locked(self, conn: psycopg.Connection[Any]) -> int:
        with conn.transaction():
            current = self._check_version(conn)  # another host may have migrated meanwhile
            if current == SCHEMA_VERSION:
                return current
            exists = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", (self.schema,)).fetchone()
            if not (exists and exists[0]):
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(self._ident))
            conn.execute(sql.SQL(_VERSION_TABLE).format(schema=self._ident))
            for version in range(current + 1, SCHEMA_VERSION + 1):
                description, script = MIGRATIONS[version - 1]
                conn.execute(sql.SQL(script).format(schema=self._ident))
                conn.execute(
                    sql.SQL("INSERT INTO {}.schema_version (version, description) VALUES (%s, %s)").format(self._ident),
                    (version, description),
                )
        return current

    def migrate(self) -> tuple[int, int]:
        """Create the schema if needed and bring it to :data:`SCHEMA_VERSION`; return (before, after).

        Idempotent; the first use of a backend does the same. Refuses a newer schema, writing nothing.
        """
        conn = self._connect_direct("connecting")
        try:
            self._configure(conn)
            result = self._migrate(conn)
        except psycopg.Error as exc:
            raise self._error("migrating the schema", exc) from None
        finally:
            conn.close()
        with self._lock:
            self._version = SCHEMA_VERSION
        return result

    @contextmanager
    def _connection(self, doing: str, create: bool) -> Iterator[psycopg.Connection[Any] | None]:
        pool = self._ready(create)
        if pool is None:
            yield None
            return
        try:
            with pool.connection() as conn:
                yield conn
        except PoolTimeout:
            self._connect_direct(doing).close()  # the server's own reason when it is unreachable
            raise self._error(
                doing, f"no free connection after {self.connect_timeout:g} s (raise pool_max_size)"
            ) from None

    def _drop_pool(self) -> None:
        """Forget the pool after a lost connection: its other connections are likely dead too, and a
        fresh pool connects at once where the old one would back off between attempts."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=1)  # connections held for a turn are closed when released

    def _diagnose(self, doing: str) -> None:
        """After a connection failed: drop the pool, and raise at once if the server cannot be
        reached (naming why), rather than waiting for a pool to give up."""
        self._drop_pool()
        self._connect_direct(doing).close()

    def _retrying(self, doing: str, create: bool, work: Callable[[psycopg.Connection[Any] | None], T]) -> T:
        """Run idempotent ``work`` on a pooled connection; once more after a lost connection."""
        for attempt in (1, 2):
            try:
                with self._connection(doing, create) as conn:
                    return work(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2:
                    raise self._error(doing, exc) from None
                self._diagnose(doing)
            except psycopg.Error as exc:
                raise self._error(doing, exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the seam -----------------------------------------------------------------------------

    def acquire(self, header: SessionHeader) -> Callable[[], None]:
        """Take the session's advisory lock on a connection kept for the turn; check writes are allowed.

        Raise :class:`SessionLockedError` naming the session and the holder's host and process,
        :class:`PersistenceError` naming the server when it cannot be reached or written. Writes
        nothing; the returned release function is idempotent.
        """
        session_id = validate_session_id(header.id)
        key = _lock_key(f"dsh session {self.schema} {session_id}")
        doing = f"locking session {session_id}"
        pool, conn, row = self._try_lock(doing, key)
        got, standby, read_only, may_insert = row
        problem = None
        if not got:
            holder = self._holder(conn, key)
            pool.putconn(conn)
            raise SessionLockedError(
                self._redact(
                    f"session {session_id} is being written by {holder} on {self.where}; wait for its turn to end"
                ),
                session_id=session_id,
            )
        if standby or read_only == "on":
            problem = "the server is read-only (a standby, or default_transaction_read_only is on)"
        elif not may_insert:
            problem = f"this user may not insert into {self.schema}.flushes"
        if problem:
            self._unlock(conn, key)
            pool.putconn(conn)
            raise self._error(f"checking that session {session_id} can be written", problem)
        with self._lock:
            self._held[session_id] = conn
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            with self._lock:
                if self._held.get(session_id) is conn:
                    del self._held[session_id]
            self._unlock(conn, key)
            if self._pool is pool:
                pool.putconn(conn)
            else:  # the backend was closed meanwhile
                conn.close()

        return release

    def _try_lock(
        self, doing: str, key: int
    ) -> tuple[ConnectionPool[psycopg.Connection[Any]], psycopg.Connection[Any], tuple[Any, ...]]:
        """Try the advisory lock on a pooled connection; once more after a lost connection."""
        for attempt in (1, 2):
            pool = self._ready(create=True)
            assert pool is not None
            try:
                conn = pool.getconn()
            except PoolTimeout:
                self._connect_direct(doing).close()  # the server's own reason when it is unreachable
                raise self._error(
                    doing, f"no free connection after {self.connect_timeout:g} s (raise pool_max_size)"
                ) from None
            try:
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(%s), pg_is_in_recovery(),"
                    " current_setting('transaction_read_only'), has_table_privilege(%s, 'INSERT')",
                    (key, f"{self.schema}.flushes"),
                ).fetchone()
                assert row is not None
                return pool, conn, row
            except psycopg.OperationalError as exc:
                pool.putconn(conn)
                if attempt == 2:
                    raise self._error(doing, exc) from None
                self._diagnose(doing)
            except psycopg.Error as exc:
                pool.putconn(conn)
                raise self._error(doing, exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _unlock(conn: psycopg.Connection[Any], key: int) -> None:
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        except psycopg.Error:
            # A dead connection holds no lock; closing a live one that failed here drops it.
            conn.close()

    def _holder(self, conn: psycopg.Connection[Any], key: int) -> str:
        try:
            row = conn.execute(
                "SELECT a.application_name, host(a.client_addr), a.pid FROM pg_locks AS l"
                " JOIN pg_stat_activity AS a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
                " AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid LIMIT 1",
                ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
            ).fetchone()
        except psycopg.Error:
            row = None
        if not row:
            return "another harness"
        app, client, pid = row
        return f"{app or 'another client'} (from {client or 'a local socket'}, server process {pid})"

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Insert the header (first time) and ``events`` as one flush row: one statement, one transaction."""
        try:
            rows = [{"type": e.type, "at": e.at, "data": e.data} for e in events]
            try:
                batch = orjson.dumps(rows).decode()
            except orjson.JSONEncodeError:
                # A string UTF-8 cannot encode (a lone surrogate) must not cost the turn: escape it.
                batch = orjson.dumps(storable(rows)).decode()
        except orjson.JSONEncodeError as exc:
            raise PersistenceError(f"an event of session {header.id} cannot be stored as JSON: {exc}") from None
        doing = f"writing session {header.id}"
        with self._lock:
            held = self._held.get(header.id)
        if held is not None and not held.closed:
            self._write_on(held, header, batch, doing)
            return
        with self._connection(doing, create=True) as conn:
            assert conn is not None
            self._write_on(conn, header, batch, doing)

    def _write_on(self, conn: psycopg.Connection[Any], header: SessionHeader, batch: str, doing: str) -> None:
        flush = sql.SQL(
            "INSERT INTO {s}.flushes (session_id, seq, events, host) VALUES (%(id)s,"
            " (SELECT COALESCE(MAX(seq) + 1, 0) FROM {s}.flushes WHERE session_id = %(id)s), %(events)s, %(host)s)"
        ).format(s=self._ident)
        params: dict[str, Any] = {"id": header.id, "events": batch, "host": self._host}
        if header.id not in self._known:
            # The header rides in the same statement: the first flush publishes both or neither.
            flush = (
                sql.SQL(
                    "WITH header AS (INSERT INTO {s}.sessions (id, created_at, header)"
                    " VALUES (%(id)s, %(created_at)s, %(header)s) ON CONFLICT (id) DO NOTHING) "
                ).format(s=self._ident)
                + flush
            )
            params.update(created_at=header.created_at, header=header.model_dump_json())
        for attempt in (1, 2):
            try:
                conn.execute(flush, params)
                break
            except psycopg.errors.UniqueViolation:
                # Another writer took this sequence number between our read and insert: once more.
                if attempt == 2:
                    raise self._error(doing, "another writer keeps taking the same flush number") from None
            except psycopg.Error as exc:
                if isinstance(exc, psycopg.OperationalError):
                    self._drop_pool()
                raise self._error(doing, exc) from None
        self._known.add(header.id)

    def load(self, session_id: str) -> StoredSession:
        """Read one session's header and events in order."""
        validate_session_id(session_id)

        def work(conn: psycopg.Connection[Any] | None) -> tuple[Any, list[Any]]:
            if conn is None:
                return None, []
            # Two statements, no transaction: the header never changes, and a flush committed in
            # between is simply included (flushes are only ever appended).
            row = conn.execute(
                sql.SQL("SELECT header::text FROM {}.sessions WHERE id = %s").format(self._ident), (session_id,)
            ).fetchone()
            batches = conn.execute(
                sql.SQL("SELECT events::text FROM {}.flushes WHERE session_id = %s ORDER BY seq").format(self._ident),
                (session_id,),
            ).fetchall()
            return row, batches

        row, batches = self._retrying(f"reading session {session_id}", False, work)
        if row is None:
            raise SessionNotFoundError(
                f"no session {session_id} in {self.where} schema {self.schema}", session_id=session_id
            )
        try:
            header = SessionHeader.model_validate_json(row[0])
            events = tuple(
                SessionEvent(type=e["type"], at=e["at"], data=e["data"])
                for (text,) in batches
                for e in orjson.loads(text)
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise PersistenceError(
                f"{self.where}: session {session_id} in schema {self.schema} is damaged: {_one_line(str(exc))}"
            ) from None
        return StoredSession(header, events)

    def list(self) -> list[SessionHeader]:
        """Every readable stored header, oldest first (see :meth:`scan`)."""
        return list(self.scan().headers)

    def scan(self) -> SessionScan:
        """Every readable stored header, oldest first, and one line per session whose header is damaged."""

        def work(conn: psycopg.Connection[Any] | None) -> list[Any]:
            if conn is None:
                return []
            return conn.execute(
                sql.SQL("SELECT id, header::text FROM {}.sessions ORDER BY created_at, id").format(self._ident)
            ).fetchall()

        headers, damaged = [], []
        for session_id, text in self._retrying("listing sessions", False, work):
            try:
                headers.append(SessionHeader.model_validate_json(text))
            except ValueError as exc:
                damaged.append(f"{self.where}: the header of session {session_id} is damaged: {_one_line(str(exc))}")
        return SessionScan(tuple(headers), tuple(damaged))

    def close(self) -> None:
        """Release held locks and close the pool."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
            pool, self._pool = self._pool, None
            self._known.clear()
        for conn in held:
            conn.close()  # closing drops its advisory locks
        if pool is not None:
            pool.close()
