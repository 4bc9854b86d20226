"""The persistence seam: what a backend implements, what it returns, and how consumers reach it.

For authors of backends (and of plugins that ask the active backend something, such as where a
transcript lives). Backends raise the errors of :mod:`dsh.session` (``PersistenceError`` and its
subclasses, each carrying the session at fault), and encode events with :func:`encode_events` /
:func:`encode_batch` so every store escapes odd strings the same way.

The codec is orjson with dsh's one rule for what orjson does not write itself (``dsh.session._json``):
:func:`json_bytes`, :func:`json_loads`.
"""

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from dsh.core import ServiceKey

from ._codec import batch_last_turn, decode_batch, encode_batch, encode_event, encode_events, turn_number
from ._json import json_bytes, json_default, json_loads, storable
from ._model import SessionEvent, SessionHeader, SessionLocation

__all__ = [
    "PERSISTENCE_GROUP",
    "SESSION_PERSISTENCE",
    "ScanningPersistence",
    "SessionPersistence",
    "SessionScan",
    "SessionTail",
    "StoredSession",
    "TailingPersistence",
    "batch_last_turn",
    "decode_batch",
    "encode_batch",
    "encode_event",
    "encode_events",
    "json_bytes",
    "json_default",
    "json_loads",
    "storable",
    "turn_number",
]


class StoredSession(NamedTuple):
    """A loaded session: its header, every complete event, and any damage found while loading."""

    header: SessionHeader
    events: tuple[SessionEvent, ...]
    damage: tuple[str, ...] = ()


class SessionScan(NamedTuple):
    """Every readable session's header, and one line (path or database and reason) per damaged one."""

    headers: tuple[SessionHeader, ...]
    damaged: tuple[str, ...] = ()


@runtime_checkable
class SessionPersistence(Protocol):
    """What a persistence backend provides as the ``session_persistence`` service."""

    def locate(self, header: SessionHeader) -> SessionLocation | None:
        """Name the session's dedicated local log, or None when there is no honest one.

        Synchronous and free of side effects: reads, creates and flushes nothing, so the
        path may not exist yet.
        """
        ...

    def acquire(self, header: SessionHeader) -> Callable[[], None]:
        """Take the session's exclusive write lock before a turn runs and check that the store can be
        written; return an idempotent release function. Raise SessionLockedError naming the session
        and where the lock is held when another writer has it; PersistenceError naming the path or
        database when the store cannot be written. Creates no transcript."""
        ...

    def write(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Durably append ``events`` as one unit (a flush); the first write also publishes the header.

        Safe without a held lock: the backend then takes and drops the lock around the write. A
        session whose write failed keeps the events and sends them again, first, in its next write.
        A backend that cannot tell whether a write it sent was stored (a commit's reply lost) raises
        :class:`~dsh.session.FlushUnconfirmedError` and settles it at that next write, storing the
        events only if they were not: a flush is never stored twice.
        """
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


class SessionTail(NamedTuple):
    """What resuming a session needs without reading its history: the header and the last turn's number.

    ``last_turn`` is the number ``n`` of the last ``turn/start`` stored (``<id>:turn-<n>``); 0 before
    the first turn.
    """

    header: SessionHeader
    last_turn: int


@runtime_checkable
class TailingPersistence(Protocol):
    """Optional: a backend that can read a session's header and last turn at a cost independent of its history."""

    def tail(self, session_id: str) -> SessionTail | None:
        """The session's tail; None when this transcript cannot tell cheaply (then the store loads it whole).

        Raises :class:`SessionNotFoundError` like :meth:`SessionPersistence.load`.
        """
        ...


@runtime_checkable
class ScanningPersistence(Protocol):
    """Optional: a backend that can list its sessions and say which ones it could not read."""

    def scan(self) -> SessionScan:
        """Headers of every readable session and one line per damaged one; never raises for one bad session."""
        ...


PERSISTENCE_GROUP = "dsh.persistence"
"""Entry-point group of persistence backends; a deployment's ``persistence.backend`` names one."""

SESSION_PERSISTENCE: ServiceKey[SessionPersistence] = ServiceKey("session_persistence")
"""The active persistence backend. Look it up at call time; never cache it."""
