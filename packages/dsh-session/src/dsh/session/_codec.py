"""Events as every backend stores them, written once: odd strings escaped, errors naming the session and event."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ._errors import PersistenceError, SessionFormatError
from ._json import json_bytes, json_loads
from ._model import SessionEvent


def encode_event(session_id: str, event: SessionEvent, *, newline: bool = False) -> bytes:
    """One event as the JSON object every backend stores (``type``, ``at``, ``data``).

    Raises :class:`PersistenceError` naming the session and the event when JSON cannot hold its data.
    """
    try:
        return json_bytes({"type": event.type, "at": event.at, "data": event.data}, newline=newline)
    except TypeError as exc:
        raise PersistenceError(
            f"event '{event.type}' of session {session_id} cannot be stored as JSON: {exc}", session_id=session_id
        ) from None


def encode_events(session_id: str, events: Sequence[SessionEvent], *, newline: bool = False) -> list[bytes]:
    """Each event of one flush as :func:`encode_event` writes it."""
    return [encode_event(session_id, e, newline=newline) for e in events]


def encode_batch(session_id: str, events: Sequence[SessionEvent]) -> str:
    """One flush as the JSON array of its events that the database backends store in one row.

    Each event is on a line of its own (``[\\n{...},\\n{...}\\n]``): JSON escapes every newline
    inside a string, so a raw newline starts a top-level event and :func:`batch_last_turn` finds
    the last turn without parsing the flush. Raises :class:`PersistenceError` naming the session
    and the first event JSON cannot hold.
    """
    return "[\n" + b",\n".join(encode_events(session_id, events)).decode() + "\n]"


def decode_batch(text: str | bytes) -> list[SessionEvent]:
    """The events of one stored flush (see :func:`encode_batch`); raise :class:`SessionFormatError` when damaged."""
    try:
        rows = json_loads(text)
    except ValueError as exc:
        raise SessionFormatError(f"a flush is not JSON ({exc})", field=None) from None
    if not isinstance(rows, list):
        raise SessionFormatError("a flush must be a JSON list of events", field=None)
    return [SessionEvent.from_dict(row) for row in rows]


_TURN_START = '\n{"type":"turn/start",'
_TURN_NUMBER = re.compile(r":turn-([0-9]+)$")


def turn_number(turn_id: object) -> int | None:
    """``n`` of a turn id ``<session>:turn-<n>``; None for anything else."""
    match = _TURN_NUMBER.search(turn_id) if isinstance(turn_id, str) else None
    return None if match is None else int(match.group(1))


def batch_last_turn(text: str) -> int | None:
    """The number of the last ``turn/start`` in a stored flush (see :func:`encode_batch`); None when it has none.

    Reads only that event. Raises :class:`SessionFormatError` when the event cannot be read, and
    for a flush stored in another layout, parses it whole.
    """
    if not text.startswith("[\n"):
        turns = [e for e in decode_batch(text) if e.type == "turn/start"]
        return None if not turns else _number(turns[-1].data.get("turn_id"))
    at = text.rfind(_TURN_START)
    if at < 0:
        return None
    end = text.find("\n", at + 1)
    line = text[at + 1 : end if end >= 0 else len(text)].rstrip(",")
    try:
        data = json_loads(line).get("data")
    except (ValueError, AttributeError):
        raise SessionFormatError("the last 'turn/start' event of a flush is not a JSON object", field=None) from None
    return _number(data.get("turn_id") if isinstance(data, dict) else None)


def _number(turn_id: object) -> int:
    number = turn_number(turn_id)
    if number is None:
        raise SessionFormatError(
            f"a 'turn/start' event has no turn id '<session>:turn-<n>' ({turn_id!r})", field="data"
        )
    return number
