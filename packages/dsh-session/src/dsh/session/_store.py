"""The session store: create, resume, fork and spawn sessions over the active persistence backend."""

from __future__ import annotations

import os
from collections.abc import Callable

from dsh.core import Context, Plugin, ServiceKey

from ._errors import ForkError, PersistenceError
from ._model import SessionHeader, SessionLocation
from ._rules import new_session_id, sanitise_claim, validate_session_id
from ._session import Session, read_stored
from .persistence import SESSION_PERSISTENCE, ScanningPersistence, SessionPersistence, SessionScan


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
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        session_id: str | None = None,
        lock: bool = False,
        outer_session: str | None = None,
        outer_call: str | None = None,
    ) -> Session:
        """A fresh session whose id is known now; nothing is written before the first flush.

        With ``lock`` the session holds its write lock (see :meth:`Session.acquire`).
        ``outer_session`` and ``outer_call``: what the process starting it claims as its own session
        and tool call (a dsh run inside another dsh's shell), recorded sanitised in the header
        (:func:`sanitise_claim`) and trusted for nothing else.
        """
        header = SessionHeader(
            id=validate_session_id(session_id) if session_id is not None else new_session_id(),
            cwd=os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()),
            outer_session=sanitise_claim(outer_session),
            outer_call=sanitise_claim(outer_call),
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
        (through the backend then active). Commands that began but were never flushed (their process
        was killed) follow the stored history as ``tool/began`` events (see :func:`read_stored`).
        """
        backend = self.persistence()
        validate_session_id(session_id)
        stored = read_stored(backend, session_id, whole=history)
        session = Session(
            self,
            stored.header,
            history=stored.events,
            damage=stored.damage,
            stored=stored.stored,
            last_turn=stored.last_turn,
        )
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
