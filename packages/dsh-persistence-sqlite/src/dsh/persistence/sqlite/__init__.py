"""SQLite session persistence for dsh: one database (WAL) for every session.

``locate()`` returns None: a row range in a shared database is no honest per-session file,
so shells get no ``DSH_SESSION_JSONL`` and hooks get a null or empty ``transcript_path``.

Each flush is one row of ``flushes`` holding that turn's events as a JSON array: one row
to insert per turn instead of one per event keeps a durable flush within twice the cost of
a raw write and fsync. The ``events`` view expands them, one row per event, for SQL.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson
from pydantic import ValidationError

from dsh.core import Context, Plugin, plugin_home
from dsh.session import (
    SESSION_PERSISTENCE,
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

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteConfig", "SqlitePersistence", "plugin"]

Synchronous = Literal["FULL", "NORMAL", "OFF"]

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL,
    description TEXT NOT NULL
);
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "sessions, flushes and the events view",
        """
        CREATE TABLE IF NOT EXISTS sessions (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            header TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS flushes (
            session_id TEXT NOT NULL REFERENCES sessions(id),
            seq INTEGER NOT NULL,
            events TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        CREATE VIEW IF NOT EXISTS events AS
            SELECT f.session_id AS session_id, f.seq AS flush, CAST(j.key AS INTEGER) AS position,
                   json_extract(j.value, '$.type') AS type, json_extract(j.value, '$.at') AS at,
                   json_extract(j.value, '$.data') AS data
            FROM flushes AS f, json_each(f.events) AS j;
        """,
    ),
)
"""Ordered schema migrations: version N is ``MIGRATIONS[N - 1]``. Each is idempotent (a database
made before versioning already holds version 1's objects) and is applied once, in order, in one
transaction with its ``schema_version`` row. Never edit a released step: append a new one."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes."""


class SqlitePersistence:
    """All sessions in one SQLite database in WAL mode.

    Each write is one ``BEGIN IMMEDIATE`` transaction; a busy timeout makes concurrent
    writers from other processes wait their turn instead of failing or corrupting the file.
    The database is created at the first write or :meth:`acquire`, never by ``locate``,
    ``load`` or ``list``. Its schema is migrated to :data:`SCHEMA_VERSION` at first use; a
    database of a newer schema is refused and never written. Every SQLite or file-system
    failure is a :class:`PersistenceError` of one line naming the database file.
    """

    def __init__(
        self, path: str | os.PathLike[str], busy_timeout: float = 30.0, synchronous: Synchronous = "FULL"
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.where = f"session database {self.path}"
        """The database, as messages name it."""
        self.lock_dir = self.path + ".locks"
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        # Next event number per session this connection wrote; saves a query per flush.
        self._next_seq: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"SqlitePersistence({self.path!r})"

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        """Always None: there is no dedicated per-session file."""
        return None

    def _error(self, doing: str, exc: BaseException) -> PersistenceError:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        reason = " ".join(reason.split()) or type(exc).__name__
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            reason += " (the file is damaged or not an SQLite database; move it aside to start a new one)"
        return PersistenceError(f"{self.where}: {doing} failed: {reason}")

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not create and not os.path.lexists(self.path):
            return None
        try:
            if create:
                os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            # O_NOFOLLOW: a database path replaced by a symlink is refused, never written through.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            os.close(fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PersistenceError(f"{self.where}: the path is a symlink; dsh writes through none") from None
            raise self._error("opening", exc) from None
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._check_version(conn)
            # Switching to WAL and migrating can meet another process doing the same; SQLite
            # does not always call the busy handler there, so retry until the busy timeout.
            deadline = time.monotonic() + self.busy_timeout
            while True:
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    self._migrate(conn)
                    break
                except sqlite3.OperationalError as exc:
                    if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.Error):
                raise self._error("opening", exc) from None
            raise
        self._conn = conn
        return conn

    @staticmethod
    def _stored_version(conn: sqlite3.Connection) -> int:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone():
            (version,) = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
            return int(version)
        return 0

    def _check_version(self, conn: sqlite3.Connection) -> int:
        version = self._stored_version(conn)
        if version > SCHEMA_VERSION:
            raise PersistenceError(
                f"session database {self.path} has schema version {version}, newer than the {SCHEMA_VERSION} "
                "this dsh-persistence-sqlite knows; upgrade dsh-persistence-sqlite (the database was not written)"
            )
        return version

    def _migrate(self, conn: sqlite3.Connection) -> tuple[int, int]:
        before = self._check_version(conn)
        if before == SCHEMA_VERSION:
            return before, before
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated between the check and the write lock.
            current = self._check_version(conn)
            conn.execute(_VERSION_TABLE)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                description, script = MIGRATIONS[version - 1]
                for statement in _statements(script):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version (version, applied_at, description) VALUES (?, ?, ?)",
                    (version, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), description),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return before, SCHEMA_VERSION

    def migrate(self) -> tuple[int, int]:
        """Create the database if needed and bring its schema to :data:`SCHEMA_VERSION`.

        Return the versions before and after. Idempotent; the first use of a backend does the same.
        """
        with self._lock:
            if self._conn is not None:
                return SCHEMA_VERSION, SCHEMA_VERSION
            existed = os.path.lexists(self.path)
            probe = None
            if existed:
                try:
                    probe = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=self.busy_timeout)
                    before = self._check_version(probe)
                except sqlite3.Error as exc:
                    raise self._error("reading the schema version", exc) from None
                finally:
                    if probe is not None:
                        probe.close()
            else:
                before = 0
            self._connect(create=True)
            return before, SCHEMA_VERSION

    def acquire(self, header: SessionHeader) -> Callable[[], None]:
        """Take the session's exclusive write lock and check the database can be written.

        The lock is an ``flock`` on ``<database>.locks/<session id>.lock`` (created 0600, never
        through a symlink), held until the returned release function runs; the kernel drops it
        when the process dies. Raise :class:`SessionLockedError` naming the session and the holder,
        :class:`PersistenceError` naming the database when it cannot be written. Writes no session.
        """
        validate_session_id(header.id)
        with self._lock:
            conn = self._connect(create=True)
            assert conn is not None
            try:
                # Proves the file and its folder are writable and the write lock can be had.
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise self._error(f"checking that session {header.id} can be written", exc) from None
        lock_path = os.path.join(self.lock_dir, f"{header.id}.lock")
        try:
            os.makedirs(self.lock_dir, mode=0o700, exist_ok=True)
            dir_fd = os.open(self.lock_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                fd = os.open(
                    f"{header.id}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
                )
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise PersistenceError(
                f"session lock {lock_path}: cannot open it: {exc.strerror or exc} (the lock folder must be a "
                "real directory, not a symlink)"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise SessionLockedError(
                f"session {header.id} is being written by {holder} (lock {lock_path}); wait for its turn to end",
                session_id=header.id,
            ) from None
        except OSError as exc:
            os.close(fd)
            raise PersistenceError(f"session lock {lock_path}: cannot lock it: {exc.strerror or exc}") from None
        # Who holds it, for the message another writer gets; best effort, the flock is the lock.
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        except OSError:
            pass
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                os.close(fd)  # closing the only descriptor drops the flock

        return release

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Insert the header (first time) and ``events`` as one flush row, in one transaction."""
        try:
            rows = [{"type": e.type, "at": e.at, "data": e.data} for e in events]
            try:
                batch = orjson.dumps(rows).decode()
            except orjson.JSONEncodeError:
                # A string UTF-8 cannot encode (a lone surrogate) must not cost the turn: escape it.
                batch = orjson.dumps(storable(rows)).decode()
        except orjson.JSONEncodeError as exc:
            raise PersistenceError(f"an event of session {header.id} cannot be stored as JSON: {exc}") from None
        with self._lock:
            conn = self._connect(create=True)
            assert conn is not None
            try:
                try:
                    self._append(conn, header, batch)
                except sqlite3.IntegrityError:
                    # Another process flushed this session since our last write: re-read its end.
                    self._next_seq.pop(header.id, None)
                    self._append(conn, header, batch)
            except sqlite3.Error as exc:
                raise self._error(f"writing session {header.id}", exc) from None

    def _append(self, conn: sqlite3.Connection, header: SessionHeader, batch: str) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
            seq = self._next_seq.get(header.id)
            if seq is None:
                conn.execute(
                    "INSERT OR IGNORE INTO sessions (id, created_at, header) VALUES (?, ?, ?)",
                    (header.id, header.created_at, header.model_dump_json()),
                )
                (last,) = conn.execute(
                    "SELECT COALESCE(MAX(seq), -1) FROM flushes WHERE session_id = ?", (header.id,)
                ).fetchone()
                seq = last + 1
            conn.execute("INSERT INTO flushes (session_id, seq, events) VALUES (?, ?, ?)", (header.id, seq, batch))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._next_seq[header.id] = seq + 1

    def load(self, session_id: str) -> StoredSession:
        """Read one session's header and events in order."""
        validate_session_id(session_id)
        with self._lock:
            conn = self._connect(create=False)
            try:
                row = (
                    None
                    if conn is None
                    else conn.execute("SELECT header FROM sessions WHERE id = ?", (session_id,)).fetchone()
                )
                if conn is None or row is None:
                    raise SessionNotFoundError(f"no session {session_id} in {self.path}", session_id=session_id)
                batches = conn.execute(
                    "SELECT events FROM flushes WHERE session_id = ? ORDER BY seq", (session_id,)
                ).fetchall()
            except sqlite3.Error as exc:
                raise self._error(f"reading session {session_id}", exc) from None
        try:
            header = SessionHeader.model_validate_json(row[0])
            events = tuple(
                SessionEvent(type=e["type"], at=e["at"], data=e["data"])
                for (batch,) in batches
                for e in orjson.loads(batch)
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise PersistenceError(f"{self.where}: session {session_id} is damaged: {_first_line(exc)}") from None
        return StoredSession(header, events)

    def list(self) -> list[SessionHeader]:
        """Every readable stored header, oldest first (see :meth:`scan`)."""
        return list(self.scan().headers)

    def scan(self) -> SessionScan:
        """Every readable stored header, oldest first, and one line per session whose header is damaged."""
        with self._lock:
            conn = self._connect(create=False)
            try:
                rows = (
                    []
                    if conn is None
                    else conn.execute("SELECT id, header FROM sessions ORDER BY created_at, id").fetchall()
                )
            except sqlite3.Error as exc:
                raise self._error("listing sessions", exc) from None
        headers, damaged = [], []
        for session_id, text in rows:
            try:
                headers.append(SessionHeader.model_validate_json(text))
            except ValueError as exc:
                damaged.append(f"{self.where}: the header of session {session_id} is damaged: {_first_line(exc)}")
        return SessionScan(tuple(headers), tuple(damaged))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._next_seq.clear()


def _statements(script: str) -> list[str]:
    """Split a migration script on the ends of complete statements (none of ours quotes a ';')."""
    out, part = [], ""
    for piece in script.split(";"):
        part += piece + ";"
        if sqlite3.complete_statement(part):
            if part.strip(" \n;"):
                out.append(part.strip())
            part = ""
    return out


def _first_line(exc: BaseException) -> str:
    """The gist of a parse or validation error, on one line (pydantic's first problem only)."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"field '{'.'.join(str(p) for p in first['loc'])}': {first['msg']}"
    return " ".join(str(exc).split())


@dataclass(frozen=True, kw_only=True)
class SqliteConfig:
    """Config of the ``sqlite`` backend."""

    path: str | None = None
    """Database file; default ``<DSH_HOME>/sessions.sqlite3``."""
    busy_timeout: float = 30.0
    synchronous: Synchronous = "FULL"
    """SQLite's durability level; FULL syncs every flush."""
    dsh_home: str | None = None


def _apply(ctx: Context, config: SqliteConfig) -> None:
    if config.path:
        path = Path(os.path.expanduser(config.path))
    else:
        path = plugin_home(ctx, config.dsh_home) / "sessions.sqlite3"
    backend = SqlitePersistence(path.absolute(), config.busy_timeout, config.synchronous)
    ctx.provide(SESSION_PERSISTENCE, backend)
    ctx.effect(lambda: backend.close, label="close sqlite")


plugin = Plugin(name="sqlite", apply=_apply, Config=SqliteConfig)
"""The ``sqlite`` entry of the ``dsh.persistence`` group."""
