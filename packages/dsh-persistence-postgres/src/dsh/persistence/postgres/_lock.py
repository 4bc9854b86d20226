"""The PostgreSQL backend's turn lock: a session-level advisory lock on a pooled connection kept for the turn."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from ._database import Database, Pool


def try_lock(
    db: Database, doing: str, key: int, session_id: str
) -> tuple[Pool, psycopg.Connection[Any], tuple[Any, ...]]:
    """Try the advisory lock ``key`` on a pooled connection, and read whether the session can be written there.

    Returns the pool, the connection (kept for the turn) and the row: got the lock, standby, read-only,
    may insert flushes, may insert and delete write-ahead records. Once more after a lost connection.
    """
    for attempt in (1, 2):
        pool = db.ready(create=True, session_id=session_id)
        assert pool is not None
        try:
            conn = pool.getconn()
        except PoolTimeout:
            raise db.no_free_connection(doing, session_id) from None
        try:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s), pg_is_in_recovery(),"
                " current_setting('transaction_read_only'), has_table_privilege(%s, 'INSERT'),"
                " has_table_privilege(%s, 'INSERT') AND has_table_privilege(%s, 'DELETE')",
                (key, f"{db.schema}.flushes", f"{db.schema}.began", f"{db.schema}.began"),
            ).fetchone()
            assert row is not None
            return pool, conn, row
        except psycopg.OperationalError as exc:
            pool.putconn(conn)
            if attempt == 2:
                raise db.error(doing, exc, session_id) from None
            db.diagnose(doing, session_id)
        except psycopg.Error as exc:
            pool.putconn(conn)
            raise db.error(doing, exc, session_id) from None
    raise AssertionError("unreachable")  # pragma: no cover


def unlock(conn: psycopg.Connection[Any], key: int) -> None:
    """Drop the advisory lock ``key`` held on ``conn``."""
    try:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    except psycopg.Error:
        # A dead connection holds no lock; closing a live one that failed here drops it.
        conn.close()


def holder(conn: psycopg.Connection[Any], key: int) -> str:
    """Who holds the advisory lock ``key``, as a message names them."""
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
