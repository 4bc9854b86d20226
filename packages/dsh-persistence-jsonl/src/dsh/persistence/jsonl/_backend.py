"""One JSONL transcript per session, recovered by flush units.

Layout of a transcript::

    {"type":"session/header","header":{...},"jsonl":2}     line 1, never rewritten
    {"type":"turn/start","at":...,"data":{...}}            the events of flush 1
    ...
    {"type":"session/flush","events":N}                    flush 1 is complete
    {"type":"tool/call",...}                               the events of flush 2
    {"type":"session/flush","events":M}                    flush 2 is complete

A flush counts only once its marker line is complete: everything after the last marker is an
interrupted flush, ignored on load and cut by the next writer. Files written before markers
existed (no ``"jsonl": 2`` and no marker) are read line by line; the first new writer seals
them with a marker before appending.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import logging
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from dsh.core import Context, Plugin, plugin_home
from dsh.session import (
    SESSION_PERSISTENCE,
    PersistenceError,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    SessionLockedError,
    SessionNotFoundError,
    SessionScan,
    SessionTail,
    StoredSession,
    storable,
)

from ._paths import session_path, transcript_name

log = logging.getLogger("dsh.persistence.jsonl")

HEADER_TYPE = "session/header"
FLUSH_TYPE = "session/flush"
KIND = "jsonl"
LAYOUT = 2
"""Version of the line layout: 2 marks the end of every flush."""

_RESERVED = frozenset({HEADER_TYPE, FLUSH_TYPE})
_MARKER_START = b'\n{"type":"' + FLUSH_TYPE.encode() + b'"'
_TURN_START = b'\n{"type":"turn/start"'
_TURN_NUMBER = re.compile(r":turn-([0-9]+)$")
_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 17
_MAX_HEADER = 1 << 20
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def _line(obj: dict[str, Any]) -> bytes:
    # orjson: serialising events is most of a flush's CPU time; it writes compact UTF-8 directly.
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        # A string UTF-8 cannot encode (a lone surrogate) must not cost the turn: escape it.
        return orjson.dumps(storable(obj), option=orjson.OPT_APPEND_NEWLINE)


def _event_line(header: SessionHeader, event: SessionEvent) -> bytes:
    if event.type in _RESERVED:
        raise PersistenceError(f"event type '{event.type}' of session {header.id} is reserved by the JSONL layout")
    try:
        return _line({"type": event.type, "at": event.at, "data": event.data})
    except orjson.JSONEncodeError as exc:
        raise PersistenceError(f"event '{event.type}' of session {header.id} cannot be stored as JSON: {exc}") from None


def _header_line(header: SessionHeader) -> bytes:
    return _line({"type": HEADER_TYPE, "header": header.model_dump(mode="json"), "jsonl": LAYOUT})


def _marker(count: int | None) -> bytes:
    return _line({"type": FLUSH_TYPE, "events": count})


def _is_marker(raw: bytes) -> bool:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and obj.get("type") == FLUSH_TYPE


@functools.lru_cache(maxsize=256)
def _parse_header(raw: bytes, path: str) -> tuple[SessionHeader, int]:
    """The header of line 1 and the file's layout version; raise naming the file when damaged.

    Cached: every append re-reads line 1, which never changes, and validating it is most of an
    unsynced append's cost.
    """
    reason = None
    try:
        first = orjson.loads(raw)
        if not isinstance(first, dict) or first.get("type") != HEADER_TYPE:
            reason = "it is not a 'session/header' line"
        else:
            header = SessionHeader.model_validate(first.get("header"))
            layout = first.get("jsonl", 1)
    except orjson.JSONDecodeError:
        reason = "it is not JSON"
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "header"
        reason = f"field {where}: {problem['msg']}"
    if reason is not None:
        raise PersistenceError(f"{path}: line 1 is not a valid session header ({reason}); the transcript is damaged")
    return header, layout if isinstance(layout, int) else 1


def _check_regular(fd: int, path: str) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise PersistenceError(f"{path} is not a regular file; move it aside")
    return info


def _open(path: str, flags: int, mode: int = 0o600) -> int:
    """Open the last component without following a symlink, with errors that name the path."""
    try:
        return os.open(path, flags | _NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PersistenceError(f"{path} is a symbolic link; dsh never writes through one (remove it)") from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise PersistenceError(f"cannot open {path}: {exc.strerror}") from None


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rfind(fd: int, needle: bytes, start: int, end: int) -> int:
    """Offset of the last ``needle`` within ``[start, end)`` of ``fd``; -1 if none.

    Reads backwards in chunks that start small (the last marker is usually in the last few bytes)
    and double up to 1 MiB, so a torn tail of any size is crossed without reading the file whole.
    """
    chunk = 4096
    while end - start >= len(needle):
        lo = max(start, end - chunk)
        index = os.pread(fd, end - lo, lo).rfind(needle)
        if index >= 0:
            return lo + index
        if lo == start:
            break
        end = lo + len(needle) - 1  # a needle may straddle the chunk boundary
        chunk = min(chunk * 2, _CHUNK)
    return -1


def _last_flush_end(fd: int, start: int, end: int) -> int | None:
    """End offset of the last complete marker line in ``[start, end)``, or None when there is none."""
    while True:
        at = _rfind(fd, _MARKER_START, start - 1, end)
        if at < 0:
            return None
        line = os.pread(fd, 256, at + 1)
        newline = line.find(b"\n")
        if newline >= 0 and _is_marker(line[:newline]):
            return at + 1 + newline + 1
        end = at + len(_MARKER_START) - 1


class JsonlPersistence:
    """Stores each session as ``<root>/<escaped cwd>/<id>.jsonl``: a header line, then flushes.

    The first write publishes header and events atomically (an exclusive, unpredictably named
    temporary file, fsync, rename); later writes append one flush and its end marker, then fsync.
    A turn holds an exclusive ``flock`` on ``<file>.lock`` from :meth:`acquire` to its flush; a
    write without it takes and drops the lock around itself. No file is ever opened through a
    symlink. Files are created 0600 and directories 0700.
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True, home: str | None = None) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.fsync = fsync
        self.home = home
        """The ``DSH_HOME`` the root was derived from, named in errors (None for a configured root)."""
        self._held: dict[str, int] = {}
        self._guard = threading.Lock()

    def __repr__(self) -> str:
        return f"JsonlPersistence({self.root!r})"

    def locate(self, header: SessionHeader) -> SessionLocation:
        """The transcript path; computed only, nothing is read or created."""
        return SessionLocation.model_construct(kind=KIND, path=session_path(self.root, header.cwd, header.id))

    # -- locking -------------------------------------------------------------------------------

    def _ensure_dir(self, path: str) -> None:
        if os.path.isdir(path):
            return
        for directory in (self.root, path):
            if os.path.isdir(directory):
                continue
            try:
                os.makedirs(directory, mode=0o700, exist_ok=True)
                os.chmod(directory, 0o700)
            except OSError as exc:
                where = f"DSH_HOME {self.home}" if self.home else f"jsonl root {self.root}"
                fix = "point DSH_HOME at a writable directory" if self.home else "fix persistence.config.root"
                raise PersistenceError(f"{where}: cannot create {directory}: {exc.strerror}; {fix}") from None

    def acquire(self, header: SessionHeader) -> Callable[[], None]:
        """Take the session's lock (``<file>.lock``) and check its transcript can be appended to.

        Raises :class:`SessionLockedError` naming the session, the lock file and the holder's pid
        when another writer (another process, or another turn of this one) holds it.
        """
        return self._acquire(header, check=True)

    def _acquire(self, header: SessionHeader, *, check: bool) -> Callable[[], None]:
        path = self.locate(header).path
        self._ensure_dir(os.path.dirname(path))
        lock_path = path + ".lock"
        with self._guard:
            if header.id in self._held:
                raise SessionLockedError(
                    f"session {header.id} is being written by another turn of this process (lock {lock_path})",
                    session_id=header.id,
                )
            fd = _open(lock_path, os.O_RDWR | os.O_CREAT)
            try:
                _check_regular(fd, lock_path)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                    by = f"process {holder}" if holder.isdigit() else "another process"
                    raise SessionLockedError(
                        f"session {header.id} is being written by {by} (lock {lock_path}); "
                        "wait for its turn to end or use another session",
                        session_id=header.id,
                    ) from None
                # Fixed width, so a shorter pid overwrites a longer one without a truncate.
                os.pwrite(fd, f"{os.getpid():>20}\n".encode(), 0)
                if check:
                    self._check_transcript(header, path)
            except BaseException:
                os.close(fd)
                raise
            self._held[header.id] = fd

        def release() -> None:
            with self._guard:
                if self._held.get(header.id) == fd:
                    del self._held[header.id]
                    os.close(fd)

        return release

    def _check_transcript(self, header: SessionHeader, path: str) -> None:
        """An existing transcript must be a regular file with an intact header of this session."""
        try:
            fd = _open(path, os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            _check_regular(fd, path)
            self._read_header(fd, path, header.id)
        finally:
            os.close(fd)

    @staticmethod
    def _read_header(fd: int, path: str, session_id: str) -> tuple[SessionHeader, int, int]:
        """Header, layout and end offset of line 1; raise when damaged or of another session."""
        head = os.pread(fd, 4096, 0)
        newline = head.find(b"\n")
        if newline < 0 and len(head) == 4096:
            head = os.pread(fd, _MAX_HEADER, 0)
            newline = head.find(b"\n")
        if newline < 0:
            raise PersistenceError(f"{path}: line 1 is not a complete session header; the transcript is damaged")
        header, layout = _parse_header(head[:newline], path)
        if header.id != session_id:
            raise PersistenceError(f"{path}: its header names session {header.id}, not {session_id}; refusing it")
        return header, layout, newline + 1

    # -- writing -------------------------------------------------------------------------------

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Append ``events`` as one flush; the first write publishes the header with them atomically."""
        lines = b"".join([_event_line(header, e) for e in events])
        with self._guard:
            held = header.id in self._held
        release = None if held else self._acquire(header, check=False)  # _write checks the transcript
        try:
            self._write(header, lines, _marker(len(events)))
        finally:
            if release is not None:
                release()

    def _write(self, header: SessionHeader, lines: bytes, marker: bytes) -> None:
        path = self.locate(header).path
        directory = os.path.dirname(path)
        try:
            fd = _open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            self._publish(header, path, directory, lines + marker)
            return
        try:
            size = _check_regular(fd, path).st_size
            _, layout, body = self._read_header(fd, path, header.id)
            end = _last_flush_end(fd, body, size)
            if end is None and layout < LAYOUT:
                # A file from before flush markers: keep its complete lines and seal them as one flush.
                end = _rfind(fd, b"\n", body - 1, size) + 1
                self._cut(fd, size, end, path)
                self._append(fd, _marker(None), path)
                size = end = os.fstat(fd).st_size
            elif end is None:
                end = body
            self._cut(fd, size, end, path)
            # One buffer, marker last: whatever prefix of it a crash leaves has no complete marker.
            self._append(fd, lines + marker, path)
        finally:
            os.close(fd)

    def _cut(self, fd: int, size: int, end: int, path: str) -> None:
        # An interrupted flush was never complete: drop it rather than glue the next one onto it.
        if end < size:
            os.ftruncate(fd, end)
            log.warning("%s: cut an interrupted flush of %d bytes before appending", path, size - end)

    def _append(self, fd: int, data: bytes, path: str) -> None:
        # Bounded writes keep each system call short; a writer killed between two leaves a prefix
        # of its flush without a marker, which the next load ignores and the next writer cuts.
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view[:_WRITE_CHUNK]) :]
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            raise PersistenceError(f"cannot append to {path}: {exc.strerror}") from None

    def _publish(self, header: SessionHeader, path: str, directory: str, payload: bytes) -> None:
        tmp = os.path.join(directory, f".{header.id}.{secrets.token_hex(8)}.tmp")
        try:
            fd = _open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileNotFoundError:
            raise PersistenceError(f"cannot create {tmp}: its directory {directory} is gone") from None
        try:
            try:
                self._append(fd, _header_line(header) + payload, tmp)
            finally:
                os.close(fd)
            os.replace(tmp, path)  # replaces a planted symlink itself, never its target
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if self.fsync:
            _fsync_dir(directory)

    # -- reading -------------------------------------------------------------------------------

    def _directories(self) -> list[os.DirEntry[str]]:
        """The per-cwd directories under the root, sorted; none when the root does not exist."""
        try:
            with os.scandir(self.root) as entries:
                return sorted(entries, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _find(self, session_id: str) -> str:
        name = transcript_name(session_id)
        for entry in self._directories():
            candidate = os.path.join(entry.path, name)
            if entry.is_dir() and os.path.lexists(candidate):
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
            fd = _open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {session_id} under {self.root}") from None
        try:
            size = _check_regular(fd, path).st_size
            header, layout, body = self._read_header(fd, path, session_id)
            end = _last_flush_end(fd, body, size) if layout >= LAYOUT else None
            if end is None:
                end = body if layout >= LAYOUT else size
            at = _rfind(fd, _TURN_START, body - 1, end)
            if at < 0:
                return SessionTail(header, 0)
            line = os.pread(fd, min(end - at - 1, _MAX_HEADER), at + 1)
        finally:
            os.close(fd)
        newline = line.find(b"\n")
        try:
            turn_id = orjson.loads(line[:newline] if newline >= 0 else line)["data"]["turn_id"]
        except (ValueError, KeyError, TypeError):
            return None
        match = _TURN_NUMBER.search(turn_id) if isinstance(turn_id, str) else None
        return None if match is None else SessionTail(header, int(match.group(1)))

    @staticmethod
    def load_file(path: str, session_id: str | None = None) -> StoredSession:
        """Read one transcript file (see :meth:`load`); with ``session_id``, refuse a header naming another."""
        try:
            fd = _open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise PersistenceError(f"{path} does not exist") from None
        try:
            _check_regular(fd, path)
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read()
        finally:
            os.close(fd)
        newline = data.find(b"\n")
        if newline < 0:
            raise PersistenceError(f"{path}: line 1 is not a complete session header; the transcript is damaged")
        header, layout = _parse_header(data[:newline], path)
        if session_id is not None and header.id != session_id:
            raise PersistenceError(f"{path}: its header names session {header.id}, not {session_id}; refusing it")
        body = newline + 1
        end = _last_flush_end_in(data, body)
        if end is None:
            end = data.rfind(b"\n") + 1 if layout < LAYOUT else body
        damage: list[str] = []
        if end < len(data):
            damage.append(
                f"{path}: ignored an interrupted flush of {len(data) - end} bytes at the end (a write was cut short)"
            )
        events = []
        in_flush = 0  # event lines since the last marker, corrupt ones included
        for number, raw in enumerate(data[body:end].split(b"\n")[:-1], start=2):
            try:
                obj = orjson.loads(raw)
                if obj.get("type") == FLUSH_TYPE:
                    expected = obj.get("events")
                    if isinstance(expected, int) and expected != in_flush:
                        damage.append(
                            f"{path}: the flush ending at line {number} has {in_flush} of its {expected} lines"
                        )
                    in_flush = 0
                    continue
                in_flush += 1
                events.append(SessionEvent(type=obj["type"], at=obj.get("at", 0.0), data=obj.get("data") or {}))
            except (ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
                damage.append(f"{path}: skipped corrupt line {number}: {type(exc).__name__}")
        return StoredSession(header, tuple(events), tuple(damage))

    def scan(self) -> SessionScan:
        """Headers of every readable transcript under the root (oldest first), and one line per damaged one."""
        headers: list[SessionHeader] = []
        damaged: list[str] = []
        for directory in self._directories():
            if not directory.is_dir():
                continue
            try:
                with os.scandir(directory.path) as entries:
                    names = sorted(e.name for e in entries if e.name.endswith(".jsonl") and not e.name.startswith("."))
            except OSError as exc:
                damaged.append(f"{directory.path}: cannot list it: {exc.strerror}")
                continue
            for name in names:
                path = os.path.join(directory.path, name)
                try:
                    fd = _open(path, os.O_RDONLY | os.O_NONBLOCK)
                    try:
                        _check_regular(fd, path)
                        header, _, _ = self._read_header(fd, path, name[: -len(".jsonl")])
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
        with self._guard:
            for fd in self._held.values():
                os.close(fd)
            self._held.clear()


def _last_flush_end_in(data: bytes, start: int) -> int | None:
    """:func:`_last_flush_end` over bytes already in memory."""
    end = len(data)
    while True:
        at = data.rfind(_MARKER_START, start - 1, end)
        if at < 0:
            return None
        newline = data.find(b"\n", at + 1)
        if newline >= 0 and _is_marker(data[at + 1 : newline]):
            return newline + 1
        end = at + len(_MARKER_START) - 1


@dataclass(frozen=True, kw_only=True)
class JsonlConfig:
    """Config of the ``jsonl`` backend."""

    root: str | None = None
    """Directory of transcripts; default ``<DSH_HOME>/sessions``."""
    dsh_home: str | None = None
    """Harness home; must agree with the deployment's (composition checks)."""
    fsync: bool = True
    """fsync every flush; turning it off trades crash durability of recent turns for speed."""


def _apply(ctx: Context, config: JsonlConfig) -> None:
    home = plugin_home(ctx, config.dsh_home)
    root = Path(os.path.expanduser(config.root)) if config.root else home / "sessions"
    backend = JsonlPersistence(root.absolute(), fsync=config.fsync, home=None if config.root else str(home))
    ctx.provide(SESSION_PERSISTENCE, backend)
    ctx.effect(lambda: backend.close, label="close jsonl locks")


plugin = Plugin(name="jsonl", apply=_apply, Config=JsonlConfig)
"""The ``jsonl`` entry of the ``dsh.persistence`` group."""
