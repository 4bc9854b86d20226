"""The JSONL backend: one transcript per session, a lock file per turn, flushes appended and fsynced."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

from dsh.paths import UntrustedPathError, ensure_private_dir
from dsh.paths.log import logger
from dsh.session import (
    PersistenceError,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    SessionNotFoundError,
)
from dsh.session.persistence import SessionScan, SessionTail, StoredSession, not_settled

from ._files import append, check_regular, fsync_dir, open_nofollow, open_read, rfind
from ._format import (
    LAYOUT,
    MAX_HEADER,
    complete_end,
    event_lines,
    header_line,
    last_flush_end,
    last_turn,
    marker,
    parse_transcript,
    read_header,
)
from ._lock import TurnLocks, locked
from ._paths import session_path, transcript_name

KIND = "jsonl"

BEGAN_SUFFIX = ".began"
"""The write-ahead file beside a transcript: ``<id>.jsonl.began`` (see :meth:`JsonlPersistence.begin`)."""


class JsonlPersistence:
    """Stores each session as ``<root>/<escaped cwd>/<id>.jsonl``: a header line, then flushes.

    The first write publishes header and events atomically (an exclusive, unpredictably named
    temporary file, fsync, rename); later writes append one flush and its end marker, then fsync.
    A turn holds an exclusive ``flock`` on ``<file>.lock`` from :meth:`acquire` to its flush; a
    write without it takes and drops the lock around itself. No file is ever opened through a
    symlink. Files are created 0600 and directories 0700.

    Before a command starts, :meth:`begin` appends a record of it to ``<file>.began`` beside the
    transcript (the transcript's own layout: header line, then each record sealed by a flush
    marker; fsynced), so a kill before the turn's flush still leaves that it began. The next
    write folds the records it does not settle into the transcript, then removes the file.
    """

    acquire_waits = False
    """Taking a session's lock never waits (a held one is refused at once) and its files are local: an
    event loop opens sessions on its own thread, as it writes them (:func:`dsh.session.persistence.acquire_waits`)."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True, home: str | None = None) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.fsync = fsync
        self.home = home
        """The ``DSH_HOME`` the root was derived from, named in errors (None for a configured root)."""
        self._locks = TurnLocks()
        self._found: dict[str, str] = {}
        """The file each session was read from: a resumed session is written where it was read."""
        self._named: set[str] = set()
        """The ``.began`` files whose name this object made durable (its folder synced) under the turn
        lock it holds now: a later record of the same turn syncs the file only (see :meth:`begin`)."""

    def __repr__(self) -> str:
        return f"JsonlPersistence({self.root!r})"

    def locate(self, header: SessionHeader) -> SessionLocation:
        """The transcript path: the file the session was read from, else computed (nothing read or created).

        A header whose ``cwd`` no longer matches the folder its file is in (edited, or the folder
        renamed) keeps its one file: deriving the path anew would split the session in two.
        """
        found = self._found.get(header.id)
        return SessionLocation(kind=KIND, path=found or session_path(self.root, header.cwd, header.id))

    # -- the turn lock -------------------------------------------------------------------------------

    def _ensure_dir(self, path: str, session_id: str) -> None:
        """Make (0700) and check the root and the session's folder by the home's trust rule, wherever they are.

        Checked on every turn, not only when made: a root or folder someone else made first (a
        0777 one in `/tmp`) would let them read every command's output and plant transcripts.
        """
        for directory, what in ((self.root, "jsonl root"), (path, "session folder")):
            try:
                ensure_private_dir(directory, what)
            except UntrustedPathError as exc:
                raise PersistenceError(str(exc), session_id=session_id) from None
            except OSError as exc:
                where = f"DSH_HOME {self.home}" if self.home else f"jsonl root {self.root}"
                fix = "point DSH_HOME at a writable directory" if self.home else "fix persistence.config.root"
                # ensure_private_dir's own errors are a sentence naming the folder; the system's are not
                reason = f"cannot create {directory}: {exc.strerror}" if exc.strerror else str(exc)
                raise PersistenceError(f"{where}: {reason}; {fix}", session_id=session_id) from None

    def acquire(self, header: SessionHeader) -> Callable[[], None]:
        """Take the session's lock (``<file>.lock``) and check its transcript can be appended to.

        Raises :class:`SessionLockedError` naming the session, the lock file and the holder's pid
        when another writer (another process, or another turn of this one) holds it.
        """
        return self._acquire(header, check=True)

    def _acquire(self, header: SessionHeader, *, check: bool) -> Callable[[], None]:
        path = self.locate(header).path
        self._ensure_dir(os.path.dirname(path), header.id)
        release = self._locks.take(
            header.id, path + ".lock", (lambda: self._check_transcript(header, path)) if check else None
        )

        def released() -> None:
            self._named.discard(path + BEGAN_SUFFIX)  # another writer may remove and make it before our next hold
            release()

        return released

    def _check_transcript(self, header: SessionHeader, path: str) -> None:
        """An existing transcript must be a regular file with an intact header of this session."""
        try:
            fd = open_nofollow(path, os.O_RDWR | os.O_NONBLOCK, session_id=header.id)
        except FileNotFoundError:
            return
        try:
            check_regular(fd, path, header.id)
            read_header(fd, path, header.id)
        finally:
            os.close(fd)

    # -- writing -------------------------------------------------------------------------------

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Append ``events`` as one flush; the first write publishes the header with them atomically.

        Write-ahead records (:meth:`begin`) of calls the flush does not hold are folded in before
        its events; the ``.began`` file is removed once the flush is durable.
        """
        lines = event_lines(header, events)
        release = (
            None if self._locks.holds(header.id) else self._acquire(header, check=False)
        )  # _write checks the transcript
        try:
            began = self.locate(header).path + BEGAN_SUFFIX
            folded = self._fold(header, began, events)
            if folded:
                lines = event_lines(header, folded) + lines
            self._write(header, lines, marker(len(folded or ()) + len(events)))
            if folded is not None:
                self._named.discard(began)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(began)  # a crash before this leaves records the transcript settles on read
        finally:
            if release is not None:
                release()

    def _write(self, header: SessionHeader, lines: bytes, end_marker: bytes) -> None:
        path = self.locate(header).path
        sid = header.id
        try:
            fd = open_nofollow(path, os.O_RDWR | os.O_APPEND | os.O_NONBLOCK, session_id=sid)
        except FileNotFoundError:
            self._publish(header, path, lines + end_marker)
            return
        try:
            size = check_regular(fd, path, sid).st_size
            _, layout, body = read_header(fd, path, sid)
            end = last_flush_end(fd, body, size)
            if end is None and layout < LAYOUT:
                # A file from before flush markers: keep its complete lines and seal them as one flush.
                end = rfind(fd, b"\n", body - 1, size) + 1
                self._cut(fd, size, end, path)
                append(fd, marker(None), path, fsync=self.fsync, session_id=sid)
                size = end = os.fstat(fd).st_size
            elif end is None:
                end = body
            self._cut(fd, size, end, path)
            # One buffer, marker last: whatever prefix of it a crash leaves has no complete marker.
            append(fd, lines + end_marker, path, fsync=self.fsync, session_id=sid)
        finally:
            os.close(fd)

    @staticmethod
    def _cut(fd: int, size: int, end: int, path: str) -> None:
        # An interrupted flush was never complete: drop it rather than glue the next one onto it.
        if end < size:
            os.ftruncate(fd, end)
            logger("dsh.persistence.jsonl").warning(
                "%s: cut an interrupted flush of %d bytes before appending", path, size - end
            )

    def _publish(self, header: SessionHeader, path: str, payload: bytes) -> None:
        directory = os.path.dirname(path)
        tmp = os.path.join(
            directory, f".{header.id}.{os.urandom(8).hex()}.tmp"
        )  # unpredictable: O_EXCL refuses a planted one
        try:
            fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, session_id=header.id)
        except FileNotFoundError:
            raise PersistenceError(
                f"cannot create {tmp}: its directory {directory} is gone", session_id=header.id
            ) from None
        try:
            try:
                append(fd, header_line(header) + payload, tmp, fsync=self.fsync, session_id=header.id)
            finally:
                os.close(fd)
            os.replace(tmp, path)  # replaces a planted symlink itself, never its target
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if self.fsync:
            fsync_dir(directory)

    # -- the write-ahead record ----------------------------------------------------------------

    def begin(self, header: SessionHeader, event: SessionEvent) -> None:
        """Append ``event`` to ``<transcript>.began`` and fsync it: the file, and its folder unless an
        earlier record of this lock hold did already.

        Called by the lock holder before a command starts; the transcript is not touched. The file
        starts with the session's header line, so a session killed in its first turn is found by it.
        A file found holding records this hold did not write (a writer killed mid-turn, perhaps
        between its two syncs) gets its folder synced too: its name may not be durable yet.
        """
        path = self.locate(header).path
        began = path + BEGAN_SUFFIX
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
        try:
            fd = open_nofollow(began, flags, session_id=header.id)
        except FileNotFoundError:  # no turn lock taken (it makes the folders): make them as it would
            self._ensure_dir(os.path.dirname(path), header.id)
            fd = open_nofollow(began, flags, session_id=header.id)
        try:
            size = check_regular(fd, began, header.id).st_size
            record = event_lines(header, (event,)) + marker(1)
            if size and b"\n" not in os.pread(fd, MAX_HEADER, 0):  # its first write cut short: nothing began
                self._cut(fd, size, 0, began)
                size = 0
            if size == 0:
                record = header_line(header) + record
            else:
                _, _, body = read_header(fd, began, header.id)
                end = last_flush_end(fd, body, size)
                self._cut(fd, size, body if end is None else end, began)  # a record torn by a kill
            append(fd, record, began, fsync=self.fsync, session_id=header.id)
        finally:
            os.close(fd)
        if self.fsync and (size == 0 or began not in self._named):
            fsync_dir(os.path.dirname(began))
            if self._locks.holds(header.id):
                self._named.add(began)

    @classmethod
    def _read_began(cls, began: str, session_id: str) -> StoredSession | None:
        """The records of a ``.began`` file; None when there is none, or no record in it is whole yet.

        :meth:`begin` creates the file and then writes its header with the first record, so a reader
        that does not hold the lock (a second ``dsh exec --session``, ``dsh sessions verify``) can find
        it empty, or its first line cut short; a kill in that moment leaves it so. Neither holds a
        record that began (the command starts only after the record is written and fsynced), so both
        read as no file; the next :meth:`begin` writes its header again. What was read is judged, once:
        the file may come and go between two looks (a flush removes it, the next turn's begin makes it).
        """
        try:
            data = cls._read(began, session_id)
        except FileNotFoundError:
            return None
        if b"\n" not in data:
            return None
        return parse_transcript(data, began, session_id)

    def _fold(self, header: SessionHeader, began: str, events: Sequence[SessionEvent]) -> list[SessionEvent] | None:
        """The records of ``began`` that neither ``events`` nor the stored transcript settle; None: no file."""
        records = self._read_began(began, header.id)
        if records is None:
            return None
        left = not_settled(records.events, events)
        if left:
            left = self._unstored(self.locate(header).path, header.id, left)
        return left

    @classmethod
    def _unstored(cls, path: str, session_id: str, records: list[SessionEvent]) -> list[SessionEvent]:
        """``records`` less those the transcript at ``path`` already holds (a crash after a fold, before the unlink)."""
        try:
            data = cls._read(path, session_id)
        except FileNotFoundError:
            return records
        return not_settled(records, parse_transcript(data, path, session_id).events)

    def unsettled(self, session_id: str) -> StoredSession | None:
        """The ``.began`` records of ``session_id`` its transcript does not hold yet, with their header."""
        path = self._found.get(session_id)
        if path is None:
            try:
                path = self._find(session_id)
            except SessionNotFoundError:
                try:
                    path = self._find(session_id, BEGAN_SUFFIX).removesuffix(BEGAN_SUFFIX)
                except SessionNotFoundError:
                    return None
        return self.unsettled_at(path, session_id)

    @classmethod
    def unsettled_at(cls, path: str, session_id: str) -> StoredSession | None:
        """The records beside the transcript ``path`` (of ``session_id``) it does not hold; None when none."""
        records = cls._read_began(path + BEGAN_SUFFIX, session_id)
        if records is None:
            return None
        left = cls._unstored(path, session_id, list(records.events))
        return StoredSession(records.header, tuple(left)) if left else None

    @staticmethod
    def lock_held(path: str) -> bool:
        """Whether a writer holds the turn lock of the transcript ``path`` now (its process is alive)."""
        return locked(path + ".lock")

    # -- reading -------------------------------------------------------------------------------

    def _directories(self) -> list[os.DirEntry[str]]:
        """The per-cwd directories under the root, sorted; none when the root does not exist."""
        try:
            with os.scandir(self.root) as entries:
                return sorted(entries, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _find(self, session_id: str, suffix: str = "") -> str:
        """The session's transcript (with ``suffix``: the file of that suffix beside it), remembered."""
        name = transcript_name(session_id) + suffix
        for entry in self._directories():
            candidate = os.path.join(entry.path, name)
            if entry.is_dir() and os.path.lexists(candidate):
                self._found[session_id] = candidate.removesuffix(suffix) if suffix else candidate
                return candidate
        raise SessionNotFoundError(f"no session {session_id} under {self.root}", session_id=session_id)

    def load(self, session_id: str) -> StoredSession:
        """Read a transcript: every complete flush, with the damage found reported."""
        return self.load_file(self._find(session_id), session_id)

    def tail(self, session_id: str) -> SessionTail | None:
        """Header and last turn number, read from line 1 and backwards from the last complete flush.

        Costs the same at any length of history. None when the last ``turn/start`` line cannot be
        read (a corrupt line): the store then loads the transcript whole.
        """
        path = self._find(session_id)
        try:
            fd = open_read(path, session_id=session_id)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {session_id} under {self.root}", session_id=session_id) from None
        try:
            size = check_regular(fd, path, session_id).st_size
            header, layout, body = read_header(fd, path, session_id)
            turn = last_turn(fd, body, complete_end(fd, layout, body, size))
        finally:
            os.close(fd)
        return None if turn is None else SessionTail(header, turn)

    @classmethod
    def load_file(cls, path: str, session_id: str | None = None) -> StoredSession:
        """Read one transcript file (see :meth:`load`); with ``session_id``, refuse a header naming another."""
        try:
            data = cls._read(path, session_id)
        except FileNotFoundError:
            raise PersistenceError(f"{path} does not exist", session_id=session_id) from None
        return parse_transcript(data, path, session_id)

    @staticmethod
    def _read(path: str, session_id: str | None) -> bytes:
        """The bytes of one file, read from the descriptor checked; ``FileNotFoundError`` when there is none."""
        fd = open_read(path, session_id=session_id)
        try:
            check_regular(fd, path, session_id)
            with os.fdopen(os.dup(fd), "rb") as fh:
                return fh.read()
        finally:
            os.close(fd)

    def scan(self) -> SessionScan:
        """Headers of every readable transcript under the root (oldest first), and one line per damaged one."""
        headers: list[SessionHeader] = []
        damaged: list[str] = []
        found: list[tuple[str, str]] = []
        for directory in self._directories():
            if not directory.is_dir():
                continue
            try:
                with os.scandir(directory.path) as entries:
                    present = [e.name for e in entries if not e.name.startswith(".")]
                transcripts = {n for n in present if n.endswith(".jsonl")}
                # A session killed in its first turn has only its write-ahead file: listed by it.
                names = sorted(
                    transcripts
                    | {
                        n
                        for n in present
                        if n.endswith(".jsonl" + BEGAN_SUFFIX) and n.removesuffix(BEGAN_SUFFIX) not in transcripts
                    }
                )
            except OSError as exc:
                damaged.append(f"{directory.path}: cannot list it: {exc.strerror}")
                continue
            found += [(directory.path, name) for name in names]
        for folder, name in found:
            path = os.path.join(folder, name)
            try:
                fd = open_read(path)
                try:
                    check_regular(fd, path)
                    header, _, _ = read_header(fd, path, name.removesuffix(BEGAN_SUFFIX)[: -len(".jsonl")])
                finally:
                    os.close(fd)
            except FileNotFoundError:
                continue  # removed while we looked
            except (PersistenceError, OSError) as exc:
                damaged.append(str(exc) if isinstance(exc, PersistenceError) else f"{path}: {exc.strerror}")
                continue
            headers.append(header)
        return SessionScan(tuple(sorted(headers, key=lambda h: (h.created_at, h.id))), tuple(damaged))

    def list(self) -> list[SessionHeader]:
        """Headers of every readable transcript under the root, oldest first (see :meth:`scan`)."""
        return list(self.scan().headers)

    def close(self) -> None:
        """Release every session lock this object holds."""
        self._named.clear()
        self._locks.close()
