"""The persistence seam: what a backend implements, what it returns, and how consumers reach it.

For authors of backends (and of plugins that ask the active backend something, such as where a
transcript lives). Backends raise the errors of :mod:`dsh.session` (``PersistenceError`` and its
subclasses, each carrying the session at fault), and encode events with :func:`encode_events` /
:func:`encode_batch` so every store escapes odd strings the same way.

The codec is orjson with dsh's one rule for what orjson does not write itself (``dsh.session._json``):
:func:`json_bytes`, :func:`json_loads`.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from dsh.core import ServiceKey

from ._codec import batch_last_turn, decode_batch, encode_batch, encode_event, encode_events, turn_number
from ._json import json_bytes, json_default, json_loads, storable
from ._model import SessionEvent, SessionHeader, SessionLocation

__all__ = [
    "BEGAN_EVENT",
    "PERSISTENCE_GROUP",
    "SESSION_PERSISTENCE",
    "FilePersistence",
    "ScanningPersistence",
    "SessionPersistence",
    "SessionScan",
    "SessionTail",
    "StoredSession",
    "TailingPersistence",
    "WriteAheadPersistence",
    "acquire_waits",
    "batch_last_turn",
    "decode_batch",
    "decode_records",
    "encode_batch",
    "encode_event",
    "encode_events",
    "json_bytes",
    "json_default",
    "json_loads",
    "not_settled",
    "storable",
    "turn_number",
    "unsettled",
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
class FilePersistence(Protocol):
    """Optional: a backend whose :meth:`~SessionPersistence.locate` names files, and that reads one by path.

    What ``dsh sessions verify`` reads a transcript file named by ``$DSH_SESSION_JSONL`` or
    ``--path`` with, so no consumer names a backend: the JSONL backend is one.
    """

    def load_file(self, path: str, session_id: str | None = None) -> StoredSession:
        """Read the transcript file at ``path`` (never through a symbolic link), recovering every complete
        event; with ``session_id``, refuse a header naming another. Raises :class:`PersistenceError`
        naming the file when it is missing, not a regular file or unreadable."""
        ...

    def unsettled_at(self, path: str, session_id: str) -> StoredSession | None:
        """The write-ahead records kept beside the transcript ``path`` that it does not hold; None when none."""
        ...

    def lock_held(self, path: str) -> bool:
        """Whether a writer holds the turn lock of the transcript ``path`` now."""
        ...


@runtime_checkable
class ScanningPersistence(Protocol):
    """Optional: a backend that can list its sessions and say which ones it could not read."""

    def scan(self) -> SessionScan:
        """Headers of every readable session and one line per damaged one; never raises for one bad session."""
        ...


BEGAN_EVENT = "tool/began"
"""The type of a write-ahead record: a tool call whose command began (see :class:`WriteAheadPersistence`)."""


@runtime_checkable
class WriteAheadPersistence(Protocol):
    """A backend that durably records each command before it starts, beside the session's transcript.

    The transcript stays lazy (nothing is stored before a turn's flush); the record keeps what a
    kill would lose: that a command began. Every dsh backend implements it, and the shared contract
    tests hold each to it.
    """

    def begin(self, header: SessionHeader, event: SessionEvent) -> None:
        """Store ``event`` (a :data:`BEGAN_EVENT` with ``call_id``) durably before its command starts.

        Called by the turn's lock holder; it may be the session's first write (the header goes with
        it). The transcript is not touched. The session's next :meth:`SessionPersistence.write`
        settles every record: one whose ``call_id`` the written events or the stored transcript hold
        as a ``tool/call`` is dropped; any other (a writer killed while its command ran) is folded
        into the transcript, in the same unit, before the written events. Raise
        :class:`~dsh.session.PersistenceError` naming the store when it cannot be written: the
        command must then not start.
        """
        ...

    def unsettled(self, session_id: str) -> StoredSession | None:
        """The records of ``session_id`` no write has settled (commands begun whose turn was never
        flushed, or is still running), with the header they were made under; None when there are none.

        Free of side effects, like :meth:`SessionPersistence.load`; a torn last record is left out.
        """
        ...


def not_settled(records: Iterable[SessionEvent], events: Iterable[SessionEvent]) -> list[SessionEvent]:
    """The write-ahead ``records`` whose call ``events`` do not hold (as a ``tool/call``, or a
    :data:`BEGAN_EVENT` folded in before): what a flush of ``events`` must fold in, in order."""
    held = {str(e.data.get("call_id")) for e in events if e.type in ("tool/call", BEGAN_EVENT)}
    return [e for e in records if str(e.data.get("call_id")) not in held]


def decode_records(rows: Sequence[tuple[str, str]]) -> StoredSession:
    """A database backend's write-ahead rows (header JSON, one-event batch), oldest first, as one
    :class:`StoredSession`; raises :class:`SessionFormatError` when one cannot be read."""
    header = SessionHeader.from_json(rows[0][0])
    return StoredSession(header, tuple(event for _, batch in rows for event in decode_batch(batch)))


def unsettled(backend: SessionPersistence, session_id: str) -> StoredSession | None:
    """``backend``'s write-ahead records of ``session_id`` no flush settled (None: none, or it keeps none)."""
    read = getattr(backend, "unsettled", None)  # WriteAheadPersistence, without a protocol check per turn
    result: StoredSession | None = None if read is None else read(session_id)
    return result


PERSISTENCE_GROUP = "dsh.persistence"
"""Entry-point group of persistence backends; a deployment's ``persistence.backend`` names one."""

SESSION_PERSISTENCE: ServiceKey[SessionPersistence] = ServiceKey("session_persistence")
"""The active persistence backend. Look it up at call time; never cache it."""


def acquire_waits(backend: SessionPersistence) -> bool:
    """Whether opening and locking a session of ``backend`` may wait on something other turns hold (a
    pool's connections, a busy database), so that an event loop serving many turns takes it on another
    thread (``dsh serve``). True unless the backend says ``acquire_waits = False``: one whose lock is
    refused at once when held and whose files are local (JSONL) is opened on the loop, as its flushes are.
    """
    return bool(getattr(backend, "acquire_waits", True))
