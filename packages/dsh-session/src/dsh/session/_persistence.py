"""The persistence seam every backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from dsh.core import DshError, ServiceKey

from ._model import SessionEvent, SessionHeader, SessionLocation


class PersistenceError(DshError):
    """A backend could not read or write a session."""


class SessionNotFoundError(PersistenceError, LookupError):
    """No stored session has the requested id."""


class SessionLockedError(PersistenceError):
    """Another process is writing the same session."""


@dataclass(frozen=True)
class StoredSession:
    """A loaded session: its header, every complete event, and any damage found while loading."""

    header: SessionHeader
    events: tuple[SessionEvent, ...]
    damage: tuple[str, ...] = field(default=())


@runtime_checkable
class SessionPersistence(Protocol):
    """What a persistence backend provides as the ``session_persistence`` service."""

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        """Name the session's dedicated local log, or None when there is no honest one.

        Synchronous and free of side effects: reads, creates and flushes nothing, so the
        path may not exist yet.
        """
        ...

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Durably append ``events``; the first write also publishes the header, atomically with them."""
        ...

    def load(self, session_id: str) -> StoredSession:
        """Load a stored session, recovering every complete event; raise :class:`SessionNotFoundError`."""
        ...

    def list(self) -> list[SessionHeader]:
        """Headers of every stored session, oldest first."""
        ...

    def close(self) -> None:
        """Release files, locks and connections."""
        ...


PERSISTENCE_GROUP = "dsh.persistence"
"""Entry-point group of persistence backends; a deployment's ``persistence.backend`` names one."""

SESSION_PERSISTENCE: ServiceKey[SessionPersistence] = ServiceKey("session_persistence")
"""The active persistence backend. Look it up at call time; never cache it."""
