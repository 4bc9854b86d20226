"""The session store: create, resume, fork and spawn sessions; buffer events; flush at turn end."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dsh.core import Context, Plugin, ServiceKey

from ._errors import ForkError, PersistenceError, SessionNotFoundError
from ._model import SessionEvent, SessionHeader, SessionLocation, new_session_id, validate_session_id
from ._persistence import (
    SESSION_PERSISTENCE,
    ScanningPersistence,
    SessionPersistence,
    SessionScan,
    TailingPersistence,
)

_TURN_RE = re.compile(r":turn-([0-9]+)$")


def _unlocked() -> None:
    """Release function of a backend written before ``acquire`` existed (it cannot lock)."""


class Session:
    """A live session: its header, the events known so far, and those not yet flushed.

    Events recorded during a turn stay in memory until :meth:`flush` (the turn-end
    checkpoint), so the stored transcript holds only the last flushed prefix. A turn takes the
    session's write lock with :meth:`acquire` before anything runs; :meth:`flush` releases it.

    A session resumed with ``history=False`` from a backend that can read its tail
    (:class:`TailingPersistence`) does not read its stored events until :attr:`history` (or
    :attr:`damage`) is asked for: a turn needs only the header and the last turn's number, so
    resuming costs the same at any length.
    """

    def __init__(
        self,
        store: SessionStore,
        header: SessionHeader,
        history: Iterable[SessionEvent] | None = (),
        pending: Iterable[SessionEvent] = (),
        damage: Iterable[str] = (),
        *,
        stored: bool = False,
        last_turn: int = 0,
    ) -> None:
        self.store = store
        self.header = header
        self.pending: list[SessionEvent] = list(pending)
        # None: the stored events are not read yet (see the class docstring); _last_turn stands in.
        self._history: list[SessionEvent] | None = None if history is None else [*history, *self.pending]
        self._damage = tuple(damage)
        self._last_turn = last_turn
        self.stored = stored
        """Whether the store holds this session (it was resumed, or flushed at least once)."""
        self._release: Callable[[], None] | None = None
        self._holds = 0

    def __repr__(self) -> str:
        return f"<Session {self.header.id} pending={len(self.pending)}>"

    @property
    def id(self) -> str:
        """The session id (known before the first turn)."""
        return self.header.id

    @property
    def history(self) -> list[SessionEvent]:
        """Every event known: the stored ones (read on first use), then those not yet flushed."""
        if self._history is None:
            stored = self.store.persistence().load(self.id)
            self._history = [*stored.events, *self.pending]
            self._damage = stored.damage
        return self._history

    @property
    def damage(self) -> tuple[str, ...]:
        """Damage found reading the stored transcript (reads it when not read yet)."""
        if self._history is None and self.stored:
            self.history  # noqa: B018 - reading the history is what finds the damage
        return self._damage

    def record(self, type: str, **data: Any) -> SessionEvent:
        """Buffer one event for the next flush."""
        event = SessionEvent(type=type, data=data)
        self.pending.append(event)
        if self._history is not None:
            self._history.append(event)
        return event

    def _reread(self, backend: SessionPersistence) -> None:
        """Catch up with what other writers flushed.

        A session whose history is not read yet reads only the tail when the backend can; one that
        holds its history in memory (a long-lived agent) reloads it, so it stays complete.
        """
        tailing = self._history is None and isinstance(backend, TailingPersistence)
        tail = backend.tail(self.id) if tailing else None  # type: ignore[attr-defined]
        if tail is not None:
            self._history, self._last_turn = None, tail.last_turn
            return
        stored = backend.load(self.id)
        self._history = [*stored.events, *self.pending]
        self._damage = stored.damage

    @property
    def locked(self) -> bool:
        """Whether this session holds its write lock (between :meth:`acquire` and the next flush)."""
        return self._release is not None

    def acquire(self) -> None:
        """Take the session's write lock for one turn and catch up with what other writers flushed.

        Idempotent while held. Raises :class:`SessionLockedError` when another writer holds the
        session and :class:`PersistenceError` when the store cannot be written; nothing has run then.
        """
        if self._release is not None:
            return
        backend = self.store.persistence()
        take = getattr(backend, "acquire", None)
        self._release = take(self.header) if take is not None else _unlocked
        if not self.stored:
            return
        try:
            self._reread(backend)
        except SessionNotFoundError:
            # Not in this store (the persistence service was replaced between turns, or the
            # session was removed): keep what this process knows; the next flush publishes it anew.
            self.stored = False
            return
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Drop the write lock if held (idempotent); :meth:`flush` calls this outside :meth:`holding`."""
        release, self._release = self._release, None
        if release is not None:
            release()

    @contextlib.contextmanager
    def holding(self) -> Iterator[Session]:
        """Keep the write lock across several flushes (one ``dsh exec``: its turn, then SessionEnd's)."""
        self.acquire()
        self._holds += 1
        try:
            yield self
        finally:
            self._holds -= 1
            if not self._holds:
                self.release()

    def flush(self) -> int:
        """Write the buffered events as one unit (the turn-end checkpoint), then release the lock.

        Returns how many events were written. The lock is released even when the write fails.
        """
        try:
            if not self.pending:
                return 0
            batch = list(self.pending)
            self.store.persistence().write(self.header, batch)
            del self.pending[: len(batch)]
            self.stored = True
            return len(batch)
        finally:
            if not self._holds:
                self.release()

    def new_turn_id(self) -> str:
        """The id of the next turn, ``<session>:turn-<n>``: past every turn the history has seen.

        Call it while holding the lock, so turns flushed by other writers are counted.
        """
        highest = self.turns
        for event in self.pending if self._history is None else self._history:
            turn_id = event.data.get("turn_id") if event.type in ("turn/start", "turn/end") else None
            match = _TURN_RE.search(turn_id) if isinstance(turn_id, str) else None
            if match:
                highest = max(highest, int(match.group(1)))
        return f"{self.id}:turn-{highest + 1}"

    def locate(self) -> SessionLocation | None:
        """Where the active backend keeps this session (may not exist before the first flush)."""
        return self.store.locate(self.header)

    @property
    def turns(self) -> int:
        """How many turns this session has started (the last stored turn's number while unread)."""
        if self._history is None:
            return self._last_turn + sum(1 for e in self.pending if e.type == "turn/start")
        return sum(1 for e in self._history if e.type == "turn/start")


class SessionStore:
    """Creates and reopens sessions over whichever persistence service is active at call time."""

    def __init__(self, persistence: Callable[[], SessionPersistence | None]) -> None:
        self._get_persistence = persistence

    def persistence(self) -> SessionPersistence:
        """The active backend; raise when none is loaded."""
        backend = self._get_persistence()
        if backend is None:
            raise PersistenceError("no session persistence service is active; load a persistence backend")
        return backend

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        """Ask the active backend (if any) where ``header``'s transcript lives, without side effects."""
        backend = self._get_persistence()
        return None if backend is None else backend.locate(header)

    def create(
        self, cwd: str | os.PathLike[str] | None = None, *, session_id: str | None = None, lock: bool = False
    ) -> Session:
        """A fresh session whose id is known now; nothing is written before the first flush.

        With ``lock`` the session holds its write lock (see :meth:`Session.acquire`).
        """
        header = SessionHeader(
            id=validate_session_id(session_id) if session_id is not None else new_session_id(),
            cwd=os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()),
        )
        session = Session(self, header)
        if lock:
            session.acquire()
        return session

    def resume(self, session_id: str, *, lock: bool = False, history: bool = True) -> Session:
        """Reopen a stored session: same header, so same id and same location.

        With ``lock`` the session's write lock is taken and the transcript read again under it, so
        the next turn sees everything other writers flushed before it. With ``history=False`` only
        the header and the last turn are read when the backend can (:class:`TailingPersistence`),
        at a cost independent of the session's length; :attr:`Session.history` is read on first use
        (through the backend then active).
        """
        backend = self.persistence()
        validate_session_id(session_id)
        tailing = not history and isinstance(backend, TailingPersistence)
        tail = backend.tail(session_id) if tailing else None  # type: ignore[attr-defined]
        if tail is not None:
            session = Session(self, tail.header, history=None, stored=True, last_turn=tail.last_turn)
        else:
            stored = backend.load(session_id)
            session = Session(self, stored.header, history=stored.events, damage=stored.damage, stored=True)
        if lock:
            session.acquire()
        return session

    def fork(self, session_id: str, upto: int | None = None) -> Session:
        """A new session seeded with the first ``upto`` events (all when None) of a stored one."""
        stored = self.persistence().load(validate_session_id(session_id))
        seed = stored.events if upto is None else stored.events[:upto]
        if upto is not None and not 0 <= upto <= len(stored.events):
            raise ForkError(
                f"fork boundary {upto} is outside session {session_id} (0..{len(stored.events)})",
                session_id=session_id,
                upto=upto,
            )
        header = SessionHeader(
            id=new_session_id(),
            cwd=stored.header.cwd,
            parent_session=stored.header.id,
            origin="fork",
            delegation_depth=stored.header.delegation_depth,
            seed_length=len(seed),
        )
        return Session(self, header, pending=seed)

    def spawn(self, parent: SessionHeader, cwd: str | None = None, *, origin: str = "subagent") -> Session:
        """A child session for a subagent: new id, the parent recorded, one level deeper."""
        header = SessionHeader(
            id=new_session_id(),
            cwd=os.path.abspath(cwd) if cwd is not None else parent.cwd,
            parent_session=parent.id,
            origin=origin,
            delegation_depth=parent.delegation_depth + 1,
        )
        return Session(self, header)

    def list(self) -> list[SessionHeader]:
        """Every stored session's header."""
        return self.persistence().list()

    def scan(self) -> SessionScan:
        """Every readable session's header, and one line per damaged one (backends that can tell)."""
        backend = self.persistence()
        if isinstance(backend, ScanningPersistence):
            return backend.scan()
        return SessionScan(tuple(backend.list()))


SESSIONS: ServiceKey[SessionStore] = ServiceKey("sessions")
"""The session store service."""


def _apply_sessions(ctx: Context, config: None) -> None:
    ctx.provide(SESSIONS, SessionStore(lambda: ctx.get(SESSION_PERSISTENCE)))


sessions_plugin = Plugin(name="sessions", apply=_apply_sessions)
"""Provides the ``sessions`` store over the current ``session_persistence`` service."""
