"""The session store: create, resume, fork and spawn sessions; buffer events; flush at turn end."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from dsh.core import Context, DshError, Plugin, ServiceKey

from ._model import SessionEvent, SessionHeader, SessionLocation, new_session_id, validate_session_id
from ._persistence import SESSION_PERSISTENCE, PersistenceError, SessionPersistence


class Session:
    """A live session: its header, the events known so far, and those not yet flushed.

    Events recorded during a turn stay in memory until :meth:`flush` (the turn-end
    checkpoint), so the stored transcript holds only the last flushed prefix.
    """

    def __init__(
        self,
        store: SessionStore,
        header: SessionHeader,
        history: Iterable[SessionEvent] = (),
        pending: Iterable[SessionEvent] = (),
        damage: Iterable[str] = (),
    ) -> None:
        self.store = store
        self.header = header
        self.pending: list[SessionEvent] = list(pending)
        self.history: list[SessionEvent] = [*history, *self.pending]
        self.damage = tuple(damage)

    def __repr__(self) -> str:
        return f"<Session {self.header.id} pending={len(self.pending)}>"

    @property
    def id(self) -> str:
        """The session id (known before the first turn)."""
        return self.header.id

    def record(self, type: str, **data: Any) -> SessionEvent:
        """Buffer one event for the next flush."""
        event = SessionEvent(type=type, data=data)
        self.pending.append(event)
        self.history.append(event)
        return event

    def flush(self) -> int:
        """Write the buffered events (the turn-end checkpoint); return how many were written."""
        if not self.pending:
            return 0
        batch = list(self.pending)
        self.store.persistence().write(self.header, batch)
        del self.pending[: len(batch)]
        return len(batch)

    def locate(self) -> SessionLocation | None:
        """Where the active backend keeps this session (may not exist before the first flush)."""
        return self.store.locate(self.header)

    @property
    def turns(self) -> int:
        """How many turns this session has started."""
        return sum(1 for e in self.history if e.type == "turn/start")


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

    def create(self, cwd: str | os.PathLike[str] | None = None, *, session_id: str | None = None) -> Session:
        """A fresh session whose id is known now; nothing is written before the first flush."""
        header = SessionHeader(
            id=validate_session_id(session_id) if session_id is not None else new_session_id(),
            cwd=os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()),
        )
        return Session(self, header)

    def resume(self, session_id: str) -> Session:
        """Reopen a stored session: same header, so same id and same location."""
        stored = self.persistence().load(validate_session_id(session_id))
        return Session(self, stored.header, history=stored.events, damage=stored.damage)

    def fork(self, session_id: str, upto: int | None = None) -> Session:
        """A new session seeded with the first ``upto`` events (all when None) of a stored one."""
        stored = self.persistence().load(validate_session_id(session_id))
        seed = stored.events if upto is None else stored.events[:upto]
        if upto is not None and not 0 <= upto <= len(stored.events):
            raise DshError(f"fork boundary {upto} is outside session {session_id} (0..{len(stored.events)})")
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


SESSIONS: ServiceKey[SessionStore] = ServiceKey("sessions")
"""The session store service."""


def _apply_sessions(ctx: Context, config: None) -> None:
    ctx.provide(SESSIONS, SessionStore(lambda: ctx.get(SESSION_PERSISTENCE)))


sessions_plugin = Plugin(name="sessions", apply=_apply_sessions)
"""Provides the ``sessions`` store over the current ``session_persistence`` service."""
