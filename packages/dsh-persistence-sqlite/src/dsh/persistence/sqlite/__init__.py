"""SQLite session persistence for dsh: one database (WAL) for every session.

``locate()`` returns None: a row range in a shared database is no honest per-session file,
so shells get no ``DSH_SESSION_JSONL`` and hooks get a null or empty ``transcript_path``.

Each flush is one row of ``flushes`` holding that turn's events as a JSON array: one row
to insert per turn instead of one per event keeps a durable flush within twice the cost of
a raw write and fsync. The ``events`` view expands them, one row per event, for SQL.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict

from dsh.core import Context, Plugin, plugin_home
from dsh.session import (
    SESSION_PERSISTENCE,
    PersistenceError,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    SessionNotFoundError,
    StoredSession,
    validate_session_id,
)

__all__ = ["SqliteConfig", "SqlitePersistence", "plugin"]

Synchronous = Literal["FULL", "NORMAL", "OFF"]

_SCHEMA = """
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
"""


class SqlitePersistence:
    """All sessions in one SQLite database in WAL mode.

    Each write is one ``BEGIN IMMEDIATE`` transaction; a busy timeout makes concurrent
    writers from other processes wait their turn instead of failing or corrupting the file.
    The database is created at the first write, never by ``locate``, ``load`` or ``list``.
    """

    def __init__(
        self, path: str | os.PathLike[str], busy_timeout: float = 30.0, synchronous: Synchronous = "FULL"
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
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

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not create and not os.path.exists(self.path):
            return None
        directory = os.path.dirname(self.path)
        if create and not os.path.isdir(directory):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        # Switching to WAL and creating the schema can meet another process doing the same; SQLite
        # does not always call the busy handler there, so retry until the busy timeout.
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(_SCHEMA)
                break
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                    conn.close()
                    raise PersistenceError(f"{self.path}: cannot open the session database: {exc}") from exc
                time.sleep(0.01)
        self._conn = conn
        return conn

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Insert the header (first time) and ``events`` as one flush row, in one transaction."""
        try:
            batch = orjson.dumps([{"type": e.type, "at": e.at, "data": e.data} for e in events]).decode()
        except orjson.JSONEncodeError as exc:
            raise PersistenceError(f"an event of session {header.id} cannot be stored as JSON: {exc}") from None
        with self._lock:
            conn = self._connect(create=True)
            assert conn is not None
            try:
                self._append(conn, header, batch)
            except sqlite3.IntegrityError:
                # Another process flushed this session since our last write: re-read its end.
                self._next_seq.pop(header.id, None)
                self._append(conn, header, batch)
            except sqlite3.Error as exc:
                raise PersistenceError(f"{self.path}: writing session {header.id} failed: {exc}") from exc

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
            row = (
                None
                if conn is None
                else conn.execute("SELECT header FROM sessions WHERE id = ?", (session_id,)).fetchone()
            )
            if conn is None or row is None:
                raise SessionNotFoundError(f"no session {session_id} in {self.path}")
            batches = conn.execute(
                "SELECT events FROM flushes WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        header = SessionHeader.model_validate_json(row[0])
        events = tuple(
            SessionEvent(type=e["type"], at=e["at"], data=e["data"])
            for (batch,) in batches
            for e in orjson.loads(batch)
        )
        return StoredSession(header, events)

    def list(self) -> list[SessionHeader]:
        """Every stored header, oldest first."""
        with self._lock:
            conn = self._connect(create=False)
            rows = (
                [] if conn is None else conn.execute("SELECT header FROM sessions ORDER BY created_at, id").fetchall()
            )
        return [SessionHeader.model_validate_json(r[0]) for r in rows]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._next_seq.clear()


class SqliteConfig(BaseModel):
    """Config of the ``sqlite`` backend."""

    model_config = ConfigDict(extra="forbid")

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
