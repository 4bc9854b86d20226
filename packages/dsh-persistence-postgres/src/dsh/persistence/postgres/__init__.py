"""PostgreSQL session persistence for dsh: one database for the sessions of a fleet of hosts.

``locate()`` returns None: rows in a shared database are no per-session file, so shells get no
``DSH_SESSION_JSONL`` and hooks get a null or empty ``transcript_path``.

Each flush is one row of ``flushes`` (that turn's events as a JSON array) written by one
statement in its own transaction. A turn holds an advisory lock on its session, on a pooled
connection kept for the turn, so two hosts resuming one session are serialised.
"""

from __future__ import annotations

from ._backend import PostgresPersistence
from ._plugin import PostgresConfig, plugin
from ._schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresConfig", "PostgresPersistence", "plugin"]
