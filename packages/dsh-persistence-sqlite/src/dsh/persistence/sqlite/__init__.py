"""SQLite session persistence for dsh: one database (WAL) for every session.

``locate()`` returns None: a row range in a shared database is no honest per-session file,
so shells get no ``DSH_SESSION_JSONL`` and hooks get a null or empty ``transcript_path``.

Each flush is one row of ``flushes`` holding that turn's events as a JSON array: one row
to insert per turn instead of one per event keeps a durable flush within twice the cost of
a raw write and fsync. The ``events`` view expands them, one row per event, for SQL.
"""

from ._backend import SqlitePersistence
from ._plugin import SqliteConfig, plugin
from ._schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteConfig", "SqlitePersistence", "plugin"]
