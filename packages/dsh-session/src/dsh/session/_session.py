"""A live session: its header, the events known so far and those not yet flushed, and its turn lock."""

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from ._codec import turn_number
from ._errors import SessionNotFoundError
from ._model import SessionEvent, SessionHeader, SessionLocation
from .persistence import BEGAN_EVENT, SessionPersistence, TailingPersistence, unsettled

if TYPE_CHECKING:
    from ._store import SessionStore


def _unlocked() -> None:
    """Release function of a backend written before ``acquire`` existed (it cannot lock)."""


_TURN_EVENTS = ("turn/start", "turn/end", BEGAN_EVENT)


class Stored(NamedTuple):
    """What a store holds of a session, as :func:`read_stored` reads it."""

    header: SessionHeader
    events: list[SessionEvent] | None
    """The stored events, then the write-ahead records no flush settled; None when only the tail was read."""
    damage: tuple[str, ...]
    last_turn: int
    """The last stored turn's number, when only the tail was read (else 0: the events tell)."""
    stored: bool
    """Whether the transcript exists (False: only write-ahead records of a session never flushed)."""


def read_stored(backend: SessionPersistence, session_id: str, *, whole: bool) -> Stored:
    """A session as its store holds it: the history, or (``whole`` False, when the backend can tell
    cheaply and no command's record is unsettled) the header and last turn only.

    Write-ahead records no flush settled (a command that began in a process killed before its
    turn's flush) follow the stored events as :data:`~dsh.session.persistence.BEGAN_EVENT` events,
    so the model and every reader learn of them; the backend folds them in at the next flush. A
    session with only such records (killed in its first turn) is found through them.
    Raises :class:`SessionNotFoundError` when the store holds neither.
    """
    records = unsettled(backend, session_id)
    if not whole and records is None and isinstance(backend, TailingPersistence):
        tail = backend.tail(session_id)
        if tail is not None:
            return Stored(tail.header, None, (), tail.last_turn, True)
    try:
        stored = backend.load(session_id)
    except SessionNotFoundError:
        if records is None:
            raise
        return Stored(records.header, list(records.events), (), 0, False)
    extra = () if records is None else records.events
    return Stored(stored.header, [*stored.events, *extra], stored.damage, 0, True)


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
        store: "SessionStore",
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
        stored = read_stored(backend, self.id, whole=self._history is not None)
        if stored.events is None:
            self._history, self._last_turn = None, stored.last_turn
            return
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
    def holding(self) -> Iterator["Session"]:
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

    def begin(self, call_id: str, **data: Any) -> None:
        """Durably record that call ``call_id``'s command is about to start, before it starts.

        The record (a ``tool/began`` event of ``call_id`` and ``data``) is kept beside the transcript
        by a backend that can (:class:`~dsh.session.persistence.WriteAheadPersistence`), and settled
        at this session's next flush. Raises :class:`PersistenceError` when it cannot be stored: the
        command must then not run.
        """
        backend = self.store.persistence()
        begin = getattr(backend, "begin", None)
        if begin is not None:
            begin(self.header, SessionEvent(type=BEGAN_EVENT, data={"call_id": call_id, **data}))

    def new_turn_id(self) -> str:
        """The id of the next turn, ``<session>:turn-<n>``: past every turn the history has seen.

        Call it while holding the lock, so turns flushed by other writers are counted (and the turn
        of a command that began in a killed process, known only from its write-ahead record).
        """
        highest = self.turns
        for event in self.pending if self._history is None else self._history:
            number = turn_number(event.data.get("turn_id")) if event.type in _TURN_EVENTS else None
            if number is not None:
                highest = max(highest, number)
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
