"""The PostgreSQL backend's connections: the DSN, a pool opened after the schema is checked and
migrated, one retry after a lost connection, and errors naming the server (never the password)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from dsh.paths.log import adopt
from dsh.session import PersistenceError

from ._schema import MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE, lock_key

T = TypeVar("T")
PSYCOPG_LOGGER = "psycopg"
"""The logger psycopg and psycopg_pool (``psycopg.pool``) write to, per their documentation."""
Pool = ConnectionPool[psycopg.Connection[Any]]


def one_line(text: str) -> str:
    return " ".join(text.split())


class Database:
    """One PostgreSQL schema reached through a DSN: direct connections for checks and migrations,
    then a pool. Constructing connects nothing."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str,
        pool_min_size: int,
        pool_max_size: int,
        statement_timeout: float | None,
        connect_timeout: float,
        env: Mapping[str, str] | None,
    ) -> None:
        environ = os.environ if env is None else env
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise PersistenceError(f"PostgreSQL schema {schema!r} is not a plain lower-case SQL identifier")
        try:
            params: dict[str, Any] = conninfo_to_dict(dsn)
        except psycopg.Error:
            # libpq's message quotes the string, which may hold a password: say only what is wrong.
            raise PersistenceError(
                "the postgres backend's dsn is not a valid libpq connection string or postgresql:// URL"
            ) from None
        self._secrets = [s for s in (params.get("password"), environ.get("PGPASSWORD")) if s]
        extra: dict[str, Any] = {"fallback_application_name": f"dsh {socket.gethostname()} pid {os.getpid()}"[:63]}
        if "connect_timeout" not in params and "PGCONNECT_TIMEOUT" not in environ:
            extra["connect_timeout"] = max(1, round(connect_timeout))
        self._conninfo = make_conninfo(dsn, **extra)
        host = params.get("host") or params.get("hostaddr") or environ.get("PGHOST")
        port = params.get("port") or environ.get("PGPORT") or "5432"
        dbname = params.get("dbname") or environ.get("PGDATABASE") or params.get("user") or environ.get("PGUSER")
        server = f"{host}:{port}" if host else f"on the local socket (port {port})"
        self.where = f"PostgreSQL {server}" + (f" database {dbname}" if dbname else "")
        """The server and database, as errors name them (never the password)."""
        self.schema = schema
        self.ident = sql.Identifier(schema)
        self.pool_min_size = pool_min_size
        self.pool_max_size = pool_max_size
        self.statement_timeout = statement_timeout
        self.connect_timeout = connect_timeout
        self.pool: Pool | None = None
        self._version: int | None = None
        self._probed = False  # a direct connection just succeeded: the next pool needs no probe
        self.lock = threading.Lock()
        """Guards the pool and the backend's bookkeeping."""

    # -- errors ---------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return one_line(text)

    def error(self, doing: str, exc: BaseException | str, session_id: str | None = None) -> PersistenceError:
        reason = str(exc).removeprefix("connection failed: ")
        return PersistenceError(self.redact(f"{self.where}: {doing} failed: {reason}"), session_id=session_id)

    def no_free_connection(self, doing: str, session_id: str | None) -> PersistenceError:
        """After a pool timeout: the server's own reason when it is unreachable, else the pool's limit."""
        self.connect_direct(doing, session_id).close()
        return self.error(
            doing, f"no free connection after {self.connect_timeout:g} s (raise pool_max_size)", session_id
        )

    # -- connections ----------------------------------------------------------------------------

    def connect_direct(self, doing: str, session_id: str | None = None) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise self.error(doing, exc, session_id) from None

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        if self.statement_timeout is not None:
            conn.execute(sql.SQL("SET statement_timeout = {}").format(int(self.statement_timeout * 1000)))

    def ready(self, create: bool, session_id: str | None = None) -> Pool | None:
        """The pool, after checking (and, when ``create`` or already versioned, migrating) the schema.

        None when the schema does not exist and ``create`` is false: nothing is stored yet.
        """
        with self.lock:
            if self.pool is not None and self._version == SCHEMA_VERSION:
                return self.pool
            probed, self._probed = self._probed, False
            if self._version is None or self._version < SCHEMA_VERSION:
                probed = True
                self._version = self._versioned(create, session_id)
                if self._version < SCHEMA_VERSION:
                    return None
            if self.pool is None:
                # psycopg_pool logs what it does with connections ("discarding closed connection")
                # to psycopg's logger: it follows dsh's library log, so it shows with `dsh --debug`
                # and is never a stray line in a command's stderr (this backend reports failures itself).
                adopt(PSYCOPG_LOGGER)
                if not probed:
                    # A pool waits out its timeout when the server is down; a direct attempt says why at once.
                    self.connect_direct("connecting", session_id).close()
                pool: Pool = ConnectionPool(
                    self._conninfo,
                    kwargs={"autocommit": True},
                    min_size=self.pool_min_size,
                    max_size=self.pool_max_size,
                    configure=self._configure,
                    timeout=self.connect_timeout,
                    name=f"dsh-{self.schema}",
                    open=False,
                )
                pool.open(wait=False)
                self.pool = pool
            return self.pool

    @contextmanager
    def connection(
        self, doing: str, create: bool, session_id: str | None = None
    ) -> Iterator[psycopg.Connection[Any] | None]:
        pool = self.ready(create, session_id)
        if pool is None:
            yield None
            return
        try:
            with pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise self.no_free_connection(doing, session_id) from None

    def drop_pool(self) -> None:
        """Forget the pool after a lost connection: its other connections are likely dead too, and a
        fresh pool connects at once where the old one would back off between attempts."""
        with self.lock:
            pool, self.pool = self.pool, None
        if pool is not None:
            pool.close(timeout=1)  # connections held for a turn are closed when released

    def diagnose(self, doing: str, session_id: str | None = None) -> None:
        """After a connection failed: drop the pool, and raise at once if the server cannot be
        reached (naming why), rather than waiting for a pool to give up."""
        self.drop_pool()
        self.connect_direct(doing, session_id).close()

    def retrying(
        self,
        doing: str,
        create: bool,
        work: Callable[[psycopg.Connection[Any] | None], T],
        session_id: str | None = None,
    ) -> T:
        """Run idempotent ``work`` on a pooled connection; once more after a lost connection."""
        for attempt in (1, 2):
            try:
                with self.connection(doing, create, session_id) as conn:
                    return work(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2:
                    raise self.error(doing, exc, session_id) from None
                self.diagnose(doing, session_id)
            except psycopg.Error as exc:
                raise self.error(doing, exc, session_id) from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the schema -----------------------------------------------------------------------------

    def _versioned(self, create: bool, session_id: str | None = None) -> int:
        """Connect directly, read the schema version and migrate an older one (a missing one only
        when ``create``); return the version now stored. Errors name ``session_id``, the session
        whose read or write needed the database."""
        conn = self.connect_direct("connecting", session_id)
        try:
            self._configure(conn)
            version = self._check_version(conn, session_id)
            if version < SCHEMA_VERSION and (create or version > 0):
                self._migrate(conn)
                version = SCHEMA_VERSION
        except psycopg.Error as exc:
            raise self.error("checking the schema version", exc, session_id) from None
        finally:
            conn.close()
        return version

    def check(self) -> None:
        """Connect once and check the schema version (see :meth:`PostgresPersistence.check`)."""
        with self.lock:
            if self._version is None or self._version < SCHEMA_VERSION:
                self._version = self._versioned(create=False)
                self._probed = True

    def _check_version(self, conn: psycopg.Connection[Any], session_id: str | None = None) -> int:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{self.schema}.schema_version",)).fetchone()
        version = 0
        if row and row[0]:
            got = conn.execute(
                sql.SQL("SELECT COALESCE(MAX(version), 0) FROM {}.schema_version").format(self.ident)
            ).fetchone()
            version = int(got[0]) if got else 0
        if version > SCHEMA_VERSION:
            raise PersistenceError(
                f"{self.where}: schema {self.schema} has dsh schema version {version}, newer than the "
                f"{SCHEMA_VERSION} this dsh-persistence-postgres knows; upgrade dsh-persistence-postgres on "
                "this host (nothing was written)",
                session_id=session_id,
            )
        return version

    def _migrate(self, conn: psycopg.Connection[Any]) -> tuple[int, int]:
        before = self._check_version(conn)
        if before == SCHEMA_VERSION:
            return before, before
        try:
            return self._migrate_from(conn)
        except psycopg.errors.InsufficientPrivilege as exc:
            # The hosts' role often may only read and insert: say who may do this, and how.
            raise PersistenceError(
                self.redact(
                    f"{self.where}: bringing schema {self.schema} from version {before} to {SCHEMA_VERSION} "
                    f"failed: {exc}; role {conn.info.user} may not change it: run `dsh sessions migrate` once "
                    f"as a role that may (one with CREATE on database {conn.info.dbname}, or the schema's owner)"
                )
            ) from None

    def _migrate_from(self, conn: psycopg.Connection[Any]) -> tuple[int, int]:
        # Hosts starting together migrate one at a time. The lock is taken before the transaction
        # begins, so the transaction's catalog lookups see what the previous holder committed.
        key = lock_key(f"dsh schema {self.schema}")
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            current = self._migrate_locked(conn)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return current, SCHEMA_VERSION

    def _migrate_locked(self, conn: psycopg.Connection[Any]) -> int:
        with conn.transaction():
            current = self._check_version(conn)  # another host may have migrated meanwhile
            if current == SCHEMA_VERSION:
                return current
            exists = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", (self.schema,)).fetchone()
            if not (exists and exists[0]):
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(self.ident))
            conn.execute(sql.SQL(VERSION_TABLE).format(schema=self.ident))
            for version in range(current + 1, SCHEMA_VERSION + 1):
                description, script = MIGRATIONS[version - 1]
                conn.execute(sql.SQL(script).format(schema=self.ident))
                conn.execute(
                    sql.SQL("INSERT INTO {}.schema_version (version, description) VALUES (%s, %s)").format(self.ident),
                    (version, description),
                )
        return current

    def migrate(self) -> tuple[int, int]:
        """Create the schema if needed and bring it to :data:`SCHEMA_VERSION`; return (before, after)."""
        conn = self.connect_direct("connecting")
        try:
            self._configure(conn)
            result = self._migrate(conn)
        except psycopg.Error as exc:
            raise self.error("migrating the schema", exc) from None
        finally:
            conn.close()
        with self.lock:
            self._version = SCHEMA_VERSION
        return result
