"""The PostgreSQL schema: ordered migrations, the version table, and advisory lock keys."""

from __future__ import annotations

import hashlib

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
    (
        "flush ids, so a flush whose commit reply was lost is never stored twice",
        """
        ALTER TABLE {schema}.flushes ADD COLUMN IF NOT EXISTS flush_id text;
        CREATE UNIQUE INDEX IF NOT EXISTS flushes_by_flush_id ON {schema}.flushes (session_id, flush_id);
        """,
    ),
    (
        "began: write-ahead records of commands whose turn is not flushed yet",
        """
        CREATE TABLE IF NOT EXISTS {schema}.began (
            session_id text NOT NULL,
            call_id text NOT NULL,
            created_at text NOT NULL,
            header jsonb NOT NULL,
            event json NOT NULL,
            at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (session_id, call_id)
        );
        """,
    ),
)
"""Ordered schema migrations: version N is ``MIGRATIONS[N - 1]``, run with ``{schema}`` bound to the
configured schema. Each is idempotent and applied once, in order, in one transaction with its
``schema_version`` row, under an advisory lock so hosts starting together migrate once. Never edit
a released step: append a new one."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes."""

VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now(),
    description text NOT NULL
);
"""


def lock_key(text: str) -> int:
    """A signed 64-bit advisory lock key for ``text`` (the same on every host)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)
