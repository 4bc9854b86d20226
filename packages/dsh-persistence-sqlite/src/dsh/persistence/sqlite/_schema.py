"""The SQLite schema: ordered migrations, the version table, and reading the stored version."""

from __future__ import annotations

import sqlite3
import time

from dsh.session import PersistenceError

VERSION_TABLE = """
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
    (
        "began: write-ahead records of commands whose turn is not flushed yet",
        """
        CREATE TABLE IF NOT EXISTS began (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            header TEXT NOT NULL,
            event TEXT NOT NULL,
            PRIMARY KEY (session_id, call_id)
        );
        """,
    ),
)
"""Ordered schema migrations: version N is ``MIGRATIONS[N - 1]``. Each is idempotent (a database
made before versioning already holds version 1's objects) and is applied once, in order, in one
transaction with its ``schema_version`` row. Never edit a released step: append a new one."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes."""


def stored_version(conn: sqlite3.Connection) -> int:
    """The schema version a database holds (0: none yet)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone():
        (version,) = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
        return int(version)
    return 0


def check_version(conn: sqlite3.Connection, path: str, session_id: str | None = None) -> int:
    """The stored version; refuse a database newer than this code (``session_id``: whose use needed it)."""
    version = stored_version(conn)
    if version > SCHEMA_VERSION:
        raise PersistenceError(
            f"session database {path} has schema version {version}, newer than the {SCHEMA_VERSION} "
            "this dsh-persistence-sqlite knows; upgrade dsh-persistence-sqlite (the database was not written)",
            session_id=session_id,
        )
    return version


def migrate(conn: sqlite3.Connection, path: str, session_id: str | None = None) -> tuple[int, int]:
    """Bring the schema to :data:`SCHEMA_VERSION` in one ``BEGIN IMMEDIATE`` transaction; return (before, after)."""
    before = check_version(conn, path, session_id)
    if before == SCHEMA_VERSION:
        return before, before
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated between the check and the write lock.
        _apply(conn, check_version(conn, path, session_id))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return before, SCHEMA_VERSION


def _apply(conn: sqlite3.Connection, current: int) -> None:
    """Apply every step after ``current`` inside the caller's write transaction."""
    conn.execute(VERSION_TABLE)
    for version in range(current + 1, SCHEMA_VERSION + 1):
        description, script = MIGRATIONS[version - 1]
        for statement in _statements(script):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_version (version, applied_at, description) VALUES (?, ?, ?)",
            (version, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), description),
        )


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
