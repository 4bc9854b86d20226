"""The ``postgres`` entry of the ``dsh.persistence`` group and its config."""

import re
from typing import NamedTuple

from dsh.core import Context, FieldError, Plugin
from dsh.session.persistence import SESSION_PERSISTENCE

from ._backend import PostgresPersistence


class _PostgresConfig(NamedTuple):
    dsn: str = ""
    """A libpq connection string or URL; empty means libpq's own defaults (``PGHOST``, ``PGDATABASE``,
    ``PGUSER``, ``PGPASSWORD``, ``~/.pgpass``, ...). Prefer ``~/.pgpass`` to a password in the file."""
    schema: str = "dsh"
    """The PostgreSQL schema holding dsh's tables (created at first use)."""
    pool_min_size: int = 1
    pool_max_size: int = 4
    statement_timeout: float | None = 30.0
    """Seconds any one statement may run; None leaves the server's setting."""
    connect_timeout: float = 10.0
    """Seconds to wait for a connection (when the DSN and ``PGCONNECT_TIMEOUT`` do not say)."""


class PostgresConfig(_PostgresConfig):
    """Config of the ``postgres`` backend. Every field has a default: libpq's environment suffices.

    A checked record: its values are checked as it is built (``_replace`` and ``_make`` skip the checks).
    """

    __slots__ = ()

    def __new__(
        cls,
        dsn: str = "",
        schema: str = "dsh",
        pool_min_size: int = 1,
        pool_max_size: int = 4,
        statement_timeout: float | None = 30.0,
        connect_timeout: float = 10.0,
    ) -> "PostgresConfig":
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise FieldError("schema", "must be a plain lower-case SQL identifier (letters, digits, _; at most 63)")
        if not pool_min_size >= 0:
            raise FieldError("pool_min_size", "must be at least 0")
        if not pool_max_size >= 1:
            raise FieldError("pool_max_size", "must be at least 1")
        if pool_min_size > pool_max_size:
            raise FieldError("pool_min_size", f"must not exceed pool_max_size ({pool_max_size})")
        if statement_timeout is not None and not statement_timeout > 0:
            raise FieldError("statement_timeout", "must be greater than 0")
        if not connect_timeout > 0:
            raise FieldError("connect_timeout", "must be greater than 0")
        return super().__new__(cls, dsn, schema, pool_min_size, pool_max_size, statement_timeout, connect_timeout)


def _apply(ctx: Context, config: PostgresConfig) -> None:
    backend = PostgresPersistence(
        config.dsn,
        schema=config.schema,
        pool_min_size=config.pool_min_size,
        pool_max_size=config.pool_max_size,
        statement_timeout=config.statement_timeout,
        connect_timeout=config.connect_timeout,
    )
    # Connect at boot: a wrong DSN or password, a server that is down or a schema newer than this
    # code stops the command with one line before it runs anything (and `dsh plugins` shows why).
    try:
        backend.check()
    except BaseException:
        backend.close()
        raise
    ctx.provide(SESSION_PERSISTENCE, backend)
    ctx.effect(lambda: backend.close, label="close postgres")


plugin = Plugin(name="postgres", apply=_apply, Config=PostgresConfig)
"""The ``postgres`` entry of the ``dsh.persistence`` group."""
