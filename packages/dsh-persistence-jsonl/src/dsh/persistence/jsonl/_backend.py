"""One JSONL transcript per session."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from dsh.core import Context, Plugin, plugin_home
from dsh.session import (
    SESSION_PERSISTENCE,
    PersistenceError,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    SessionLockedError,
    SessionNotFoundError,
    StoredSession,
    validate_session_id,
)

from ._paths import escape_cwd

log = logging.getLogger("dsh.persistence.jsonl")

HEADER_TYPE = "session/header"
KIND = "jsonl"


def _line(obj: dict[str, Any]) -> bytes:
    # orjson: serialising events is most of a flush's CPU time; it writes compact UTF-8 directly.
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


def _event_line(header: SessionHeader, event: SessionEvent) -> bytes:
    try:
        return _line({"type": event.type, "at": event.at, "data": event.data})
    except orjson.JSONEncodeError as exc:
        raise PersistenceError(f"event '{event.type}' of session {header.id} cannot be stored as JSON: {exc}") from None


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JsonlPersistence:
    """Stores each session as ``<root>/<escaped cwd>/<id>.jsonl``: a header line, then events.

    The first write publishes header and events atomically (temporary file, fsync, rename);
    later writes append and fsync. A writer holds an exclusive lock on ``<file>.lock`` from its
    first write until :meth:`close`, so a second process gets :class:`SessionLockedError`.
    Files are created 0600 and directories 0700.
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.fsync = fsync
        self._locks: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"JsonlPersistence({self.root!r})"

    def locate(self, header: SessionHeader) -> SessionLocation:
        """The transcript path; computed only, nothing is read or created."""
        path = os.path.join(self.root, escape_cwd(header.cwd), header.id + ".jsonl")
        return SessionLocation.model_construct(kind=KIND, path=path)

    def _ensure_dir(self, path: str) -> None:
        for directory in (self.root, path):
            if not os.path.isdir(directory):
                os.makedirs(directory, mode=0o700, exist_ok=True)
                os.chmod(directory, 0o700)

    def _lock(self, header: SessionHeader, path: str) -> None:
        if header.id in self._locks:
            return
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionLockedError(
                f"session {header.id} is being written by another process (lock held on {path}.lock)"
            ) from None
        self._locks[header.id] = fd

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Append ``events``; the first write publishes the header with them atomically."""
        path = self.locate(header).path
        directory = os.path.dirname(path)
        self._ensure_dir(directory)
        self._lock(header, path)
        payload = b"".join([_event_line(header, e) for e in events])
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, _line({"type": HEADER_TYPE, "header": header.model_dump(mode="json")}) + payload)
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            if self.fsync:
                _fsync_dir(directory)
            return
        if not payload:
            return
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                self._cut_torn_tail(fd, size, path)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _cut_torn_tail(fd: int, size: int, path: str) -> None:
        # A crash mid-append left a partial line; it was never a complete event, so drop it
        # rather than glue the next event onto it.
        start = max(0, size - (1 << 20))
        chunk = os.pread(fd, size - start, start)
        keep = start + chunk.rfind(b"\n") + 1 if b"\n" in chunk else 0
        os.ftruncate(fd, keep)
        log.warning("%s: dropped a torn last line of %d bytes before appending", path, size - keep)

    def _find(self, session_id: str) -> str:
        validate_session_id(session_id)
        name = session_id + ".jsonl"
        with contextlib.suppress(FileNotFoundError), os.scandir(self.root) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                candidate = os.path.join(entry.path, name)
                if entry.is_dir() and os.path.isfile(candidate):
                    return candidate
        raise SessionNotFoundError(f"no session {session_id} under {self.root}")

    def load(self, session_id: str) -> StoredSession:
        """Read a transcript, keeping every complete line and reporting what was skipped."""
        return self.load_file(self._find(session_id))

    @staticmethod
    def load_file(path: str) -> StoredSession:
        """Read one transcript file (see :meth:`load`)."""
        data = Path(path).read_bytes()
        lines = data.split(b"\n")
        torn = lines.pop()  # b"" when the file ends with a newline
        damage: list[str] = []
        if torn:
            damage.append(f"{path}: ignored a torn last line of {len(torn)} bytes (a write was interrupted)")
        if not lines:
            raise PersistenceError(f"{path}: transcript has no complete header line")
        try:
            first = orjson.loads(lines[0])
            header = SessionHeader.model_validate(first["header"] if first.get("type") == HEADER_TYPE else None)
        except (ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
            raise PersistenceError(f"{path}: line 1 is not a session header: {exc}") from None
        events = []
        for number, raw in enumerate(lines[1:], start=2):
            try:
                obj = orjson.loads(raw)
                events.append(SessionEvent(type=obj["type"], at=obj.get("at", 0.0), data=obj.get("data") or {}))
            except (ValueError, KeyError, TypeError, ValidationError) as exc:
                damage.append(f"{path}: skipped corrupt line {number}: {type(exc).__name__}")
        return StoredSession(header, tuple(events), tuple(damage))

    def list(self) -> list[SessionHeader]:
        """Headers of every transcript under the root, oldest first."""
        headers = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self.root) as dirs:
            for directory in dirs:
                if not directory.is_dir():
                    continue
                for entry in os.scandir(directory.path):
                    if not entry.name.endswith(".jsonl"):
                        continue
                    with open(entry.path, "rb") as fh:
                        first = fh.readline()
                    try:
                        headers.append(SessionHeader.model_validate(orjson.loads(first)["header"]))
                    except (ValueError, KeyError, TypeError, ValidationError):
                        raise PersistenceError(f"{entry.path}: line 1 is not a session header") from None
        return sorted(headers, key=lambda h: (h.created_at, h.id))

    def close(self) -> None:
        """Release every session lock this process holds."""
        for fd in self._locks.values():
            os.close(fd)
        self._locks.clear()


class JsonlConfig(BaseModel):
    """Config of the ``jsonl`` backend."""

    model_config = ConfigDict(extra="forbid")

    root: str | None = None
    """Directory of transcripts; default ``<DSH_HOME>/sessions``."""
    dsh_home: str | None = None
    """Harness home; must agree with the deployment's (composition checks)."""
    fsync: bool = True
    """fsync every flush; turning it off trades crash durability of recent turns for speed."""


def _apply(ctx: Context, config: JsonlConfig) -> None:
    home = plugin_home(ctx, config.dsh_home)
    root = Path(os.path.expanduser(config.root)) if config.root else home / "sessions"
    backend = JsonlPersistence(root.absolute(), fsync=config.fsync)
    ctx.provide(SESSION_PERSISTENCE, backend)
    ctx.effect(lambda: backend.close, label="close jsonl locks")


plugin = Plugin(name="jsonl", apply=_apply, Config=JsonlConfig)
"""The ``jsonl`` entry of the ``dsh.persistence`` group."""
