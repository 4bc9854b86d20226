"""The ``sqlite`` entry of the ``dsh.persistence`` group and its config."""

import os
from pathlib import Path
from typing import NamedTuple

from dsh.core import Context, Plugin
from dsh.session import plugin_home
from dsh.session.persistence import SESSION_PERSISTENCE

from ._backend import SqlitePersistence, Synchronous


class SqliteConfig(NamedTuple):
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
