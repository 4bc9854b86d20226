"""The ``postgres`` entry of the ``dsh.persistence`` group and its config."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dsh.core import Context, Plugin
from dsh.session import SESSION_PERSISTENCE

from ._backend import PostgresPersistence


class PostgresConfig(BaseModel):
    """Config of the ``postgres`` backend. Every field has a default: libpq's environment suffices."""

    model_config = ConfigDict(extra="forbid")

    dsn: str = ""
    """A libpq connection string or URL; empty means libpq's own defaults (``PGHOST``, ``PGDATABASE``,
    ``PGUSER``, ``PGPASSWORD``, ``~/.pgpass``, ...). Prefer ``~/.pgpass`` to a password in the file."""
    schema_: str = Field("dsh", alias="schema")
    """The PostgreSQL schema holding dsh's tables (created at first use)."""
    pool_min_size: int = Field(1, ge=0)
    pool_max_size: int = Field(4, ge=1)
    statement_timeout: float | None = Field(30.0, gt=0)
    """Seconds any one statement may run; None leaves the server's setting."""
    connect_timeout: float = Field(10.0, gt=0)
    """Seconds to wait for a connection (when the DSN and ``PGCONNECT_TIMEOUT`` do not say)."""

    @field_validator("schema_")
    @classmethod
    def _plain_identifier(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
            raise ValueError("must be a plain lower-case SQL identifier (letters, digits, _; at most 63)")
        return value


def _apply(ctx: Context, config: PostgresConfig) -> None:
    if config.pool_min_size > config.pool_max_size:
        raise ValueError("config field 'pool_min_size' is larger than 'pool_max_size'")
    backend = PostgresPersistence(
        config.dsn,
        schema=config.schema_,
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
