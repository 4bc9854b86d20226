"""The SQLite backend: one database (WAL) for every session, a lock file per turn, one row per flush."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal

from dsh.paths import UntrustedPathError, check_trusted, ensure_private_dir
from dsh.session import (
    PersistenceError,
    SessionEvent,
    SessionFormatError,
    SessionHeader,
    SessionLocation,
    SessionNotFoundError,
    validate_session_id,
)
from dsh.session.persistence import (
    SessionScan,
    SessionTail,
    StoredSession,
    batch_last_turn,
    decode_batch,
    decode_records,
    encode_batch,
    not_settled,
)

from ._lock import lock_file
from ._schema import SCHEMA_VERSION, check_version, migrate

Synchronous = Literal["FULL", "NORMAL", "OFF"]


class SqlitePersistence:
    """All sessions in one SQLite database in WAL mode.

    Each write is one ``BEGIN IMMEDIATE`` transaction; a busy timeout makes concurrent
    writers from other processes wait their turn instead of failing or corrupting the file.
    The database is created at the first write or :meth:`acquire`, never by ``locate``,
    ``load``, ``tail`` or ``list``. Its schema is migrated to :data:`SCHEMA_VERSION` at first
    use; a database of a newer schema is refused and never written. Every SQLite or file-system
    failure is a :class:`PersistenceError` of one line naming the database file (and the session).

    Before a command starts, :meth:`begin` commits a row to ``began`` (the write-ahead record);
    the session's next write folds the rows its events do not settle into its flush and deletes
    them all, in the same transaction.
    """

    def __init__(
        self, path: str | os.PathLike[str], busy_timeout: float = 30.0, synchronous: Synchronous = "FULL"
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.where = f"session database {self.path}"
        """The database, as messages name it."""
        self.lock_dir = self.path + ".locks"
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

    def _error(self, doing: str, exc: BaseException, session_id: str | None = None) -> PersistenceError:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        reason = " ".join(reason.split()) or type(exc).__name__
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            reason += " (the file is damaged or not an SQLite database; move it aside to start a new one)"
        return PersistenceError(f"{self.where}: {doing} failed: {reason}", session_id=session_id)

    # -- the database and its schema ------------------------------------------------------------

    def _connect(self, create: bool, session_id: str | None = None) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not create and not os.path.lexists(self.path):
            return None
        try:
            # The home's trust rule, wherever the database is: SQLite adds `-wal`, `-shm` and
            # `-journal` files beside it, so its folder must be one only we can write (a shared
            # `/tmp` would let anyone plant them), and the file must be ours and private.
            folder = os.path.dirname(self.path)
            if create:
                ensure_private_dir(folder, "session database folder")
            else:
                check_trusted(folder, "session database folder")
            # O_NOFOLLOW: a database path replaced by a symlink is refused, never written through.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            os.close(fd)
            check_trusted(self.path, "session database")
        except UntrustedPathError as exc:
            raise PersistenceError(str(exc), session_id=session_id) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PersistenceError(
                    f"{self.where}: the path is a symlink; dsh writes through none", session_id=session_id
                ) from None
            raise self._error("opening", exc, session_id) from None
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            check_version(conn, self.path, session_id)
            # Switching to WAL and migrating can meet another process doing the same; SQLite
            # does not always call the busy handler there, so retry until the busy timeout.
            deadline = time.monotonic() + self.busy_timeout
            while True:
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    migrate(conn, self.path, session_id)
                    break
                except sqlite3.OperationalError as exc:
                    if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.Error):
                raise self._error("opening", exc, session_id) from None
            raise
        self._conn = conn
        return conn

    def migrate(self) -> tuple[int, int]:
        """Create the database if needed and bring its schema to :data:`SCHEMA_VERSION`.

        Return the versions before and after. Idempotent; the first use of a backend does the same.
        """
        with self._lock:
            if self._conn is not None:
                return SCHEMA_VERSION, SCHEMA_VERSION
            existed = os.path.lexists(self.path)
            probe = None
            if existed:
                try:
                    probe = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=self.busy_timeout)
                    before = check_version(probe, self.path)
                except sqlite3.Error as exc:
                    raise self._error("reading the schema version", exc) from None
                finally:
                    if probe is not None:
                        probe.close()
            else:
                before = 0
            self._connect(create=True)
            return before, SCHEMA_VERSION

    # -- the seam -------------------------------------------------------------------------------

    def acquire(self, header: SessionHeader) -> Callable[[], None]:
        """Take the session's exclusive write lock and check the database can be written.

        The lock is an ``flock`` on ``<database>.locks/<session id>.lock`` (created 0600, never
        through a symlink), held until the returned release function runs; the kernel drops it
        when the process dies. Raise :class:`SessionLockedError` naming the session and the holder,
        :class:`PersistenceError` naming the database when it cannot be written. Writes no session.
        """
        sid = validate_session_id(header.id)
        with self._lock:
            conn = self._connect(create=True, session_id=sid)
            assert conn is not None
            try:
                # Proves the file and its folder are writable and the write lock can be had.
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise self._error(f"checking that session {sid} can be written", exc, sid) from None
        return lock_file(self.lock_dir, sid)

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Insert the header (first time) and ``events`` as one flush row, in one transaction.

        The session's ``began`` rows are settled in the same transaction: those of calls ``events``
        do not hold are folded into the flush, before its events, and every row is deleted.
        """
        batch = encode_batch(header.id, events)
        with self._lock:
            conn = self._connect(create=True, session_id=header.id)
            assert conn is not None
            try:
                try:
                    self._append(conn, header, batch, events)
                except sqlite3.IntegrityError:
                    # Another process flushed this session since our last write: re-read its end.
                    self._next_seq.pop(header.id, None)
                    self._append(conn, header, batch, events)
            except sqlite3.Error as exc:
                raise self._error(f"writing session {header.id}", exc, header.id) from None

    def begin(self, header: SessionHeader, event: SessionEvent) -> None:
        """Commit ``event`` as the session's ``began`` row for its call (as durable as a flush, per ``synchronous``)."""
        sid = header.id
        with self._lock:
            conn = self._connect(create=True, session_id=sid)
            assert conn is not None
            try:
                # One statement outside a transaction is its own, committed at once.
                conn.execute(
                    "INSERT OR REPLACE INTO began (session_id, call_id, created_at, header, event) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (
                        sid,
                        str(event.data.get("call_id")),
                        header.created_at,
                        header.to_json(),
                        encode_batch(sid, (event,)),
                    ),
                )
            except sqlite3.Error as exc:
                raise self._error(f"recording that a command of session {sid} began", exc, sid) from None

    def unsettled(self, session_id: str) -> StoredSession | None:
        """The session's ``began`` rows, oldest first, with the header they were made under."""
        validate_session_id(session_id)
        with self._lock:
            conn = self._connect(create=False)
            if conn is None:
                return None
            try:
                rows = conn.execute(
                    "SELECT header, event FROM began WHERE session_id = ? ORDER BY rowid", (session_id,)
                ).fetchall()
            except sqlite3.Error as exc:
                raise self._error(f"reading session {session_id}", exc, session_id) from None
        if not rows:
            return None
        try:
            return decode_records(rows)
        except SessionFormatError as exc:
            raise self._damaged(session_id, exc) from None

    def _folded(self, conn: sqlite3.Connection, header: SessionHeader, events: Sequence[SessionEvent]) -> str | None:
        """The flush re-encoded with the ``began`` rows it does not settle first; None when it needs none.

        Runs inside the write's transaction, which also deletes the rows.
        """
        rows = conn.execute("SELECT event FROM began WHERE session_id = ? ORDER BY rowid", (header.id,)).fetchall()
        if not rows:
            return None
        conn.execute("DELETE FROM began WHERE session_id = ?", (header.id,))
        try:
            records = [e for (batch,) in rows for e in decode_batch(batch)]
        except SessionFormatError as exc:
            raise self._damaged(header.id, exc) from None
        left = not_settled(records, events)
        return encode_batch(header.id, [*left, *events]) if left else None

    def _append(
        self, conn: sqlite3.Connection, header: SessionHeader, batch: str, events: Sequence[SessionEvent]
    ) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
            batch = self._folded(conn, header, events) or batch
            seq = self._next_seq.get(header.id)
            if seq is None:
                conn.execute(
                    "INSERT OR IGNORE INTO sessions (id, created_at, header) VALUES (?, ?, ?)",
                    (header.id, header.created_at, header.to_json()),
                )
                (last,) = conn.execute(
                    "SELECT COALESCE(MAX(seq), -1) FROM flushes WHERE session_id = ?", (header.id,)
                ).fetchone()
                if last.__class__ is not int:
                    # SQLite keeps any type in any column: an edited row must not crash after the command ran.
                    raise PersistenceError(
                        f"{self.where}: session {header.id} is damaged: field 'flushes.seq' holds "
                        f"{repr(last)[:40]}, not an integer; move the database aside or repair the row",
                        session_id=header.id,
                    )
                seq = last + 1
            conn.execute("INSERT INTO flushes (session_id, seq, events) VALUES (?, ?, ?)", (header.id, seq, batch))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._next_seq[header.id] = seq + 1

    def _header(self, conn: sqlite3.Connection | None, session_id: str) -> SessionHeader:
        row = (
            None if conn is None else conn.execute("SELECT header FROM sessions WHERE id = ?", (session_id,)).fetchone()
        )
        if row is None:
            raise SessionNotFoundError(f"no session {session_id} in {self.path}", session_id=session_id)
        try:
            header = SessionHeader.from_json(row[0])
        except SessionFormatError as exc:
            raise self._damaged(session_id, exc) from None
        if header.id != session_id:
            raise PersistenceError(self._foreign(header, session_id), session_id=session_id)
        return header

    def _foreign(self, header: SessionHeader, session_id: str) -> str:
        # The words of the JSONL backend: a header is never accepted under another session's id.
        return f"{self.where}: its header names session {header.id}, not {session_id}; refusing it"

    def _damaged(self, session_id: str, exc: SessionFormatError) -> PersistenceError:
        return PersistenceError(f"{self.where}: session {session_id} is damaged: {exc.problem}", session_id=session_id)

    def load(self, session_id: str) -> StoredSession:
        """Read one session's header and events in order."""
        validate_session_id(session_id)
        with self._lock:
            conn = self._connect(create=False)
            try:
                header = self._header(conn, session_id)
                assert conn is not None
                batches = conn.execute(
                    "SELECT events FROM flushes WHERE session_id = ? ORDER BY seq", (session_id,)
                ).fetchall()
            except sqlite3.Error as exc:
                raise self._error(f"reading session {session_id}", exc, session_id) from None
        try:
            events = tuple(event for (batch,) in batches for event in decode_batch(batch))
        except SessionFormatError as exc:
            raise self._damaged(session_id, exc) from None
        return StoredSession(header, events)

    def tail(self, session_id: str) -> SessionTail | None:
        """Header and last turn number, reading flushes newest first only until one holds a ``turn/start``.

        Costs the same at any length of history (a flush is one turn). None when that event cannot
        be read: the store then loads the session whole, which reports the damage.
        """
        validate_session_id(session_id)
        with self._lock:
            conn = self._connect(create=False)
            try:
                header = self._header(conn, session_id)
                assert conn is not None
                turn = 0
                # The cursor steps one row at a time: older flushes are never read. Closing it ends
                # the read at once, so the connection holds no snapshot of the database afterwards.
                rows = conn.execute("SELECT events FROM flushes WHERE session_id = ? ORDER BY seq DESC", (session_id,))
                try:
                    for (batch,) in rows:
                        if batch.__class__ is not str:
                            return None  # damaged: the whole load reports it
                        found = batch_last_turn(batch)
                        if found is not None:
                            turn = found
                            break
                finally:
                    rows.close()
            except sqlite3.Error as exc:
                raise self._error(f"reading session {session_id}", exc, session_id) from None
            except SessionFormatError:
                return None
        return SessionTail(header, turn)

    def list(self) -> list[SessionHeader]:
        """Every readable stored header, oldest first (see :meth:`scan`)."""
        return list(self.scan().headers)

    def scan(self) -> SessionScan:
        """Every readable stored header, oldest first, and one line per session whose header is damaged."""
        with self._lock:
            conn = self._connect(create=False)
            try:
                rows = (
                    []
                    if conn is None
                    else conn.execute(
                        # A session killed in its first turn has only its write-ahead rows: listed by them.
                        "SELECT id, header, created_at FROM sessions UNION ALL "
                        "SELECT session_id, MIN(header), MIN(created_at) FROM began "
                        "WHERE session_id NOT IN (SELECT id FROM sessions) GROUP BY session_id ORDER BY 3, 1"
                    ).fetchall()
                )
            except sqlite3.Error as exc:
                raise self._error("listing sessions", exc) from None
        headers, damaged = [], []
        from_json = SessionHeader.from_json
        for session_id, text, _ in rows:
            try:
                header = from_json(text)
            except SessionFormatError as exc:
                damaged.append(f"{self.where}: the header of session {session_id} is damaged: {exc.problem}")
                continue
            if header.id != session_id:
                damaged.append(self._foreign(header, session_id))
                continue
            headers.append(header)
        return SessionScan(tuple(headers), tuple(damaged))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._next_seq.clear()
