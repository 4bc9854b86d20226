"""The JSONL line layout: encoding a flush, and reading header, flush ends, events and the last turn back.

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

import functools
import os
from collections.abc import Sequence
from json import JSONDecodeError

from dsh.session import PersistenceError, SessionEvent, SessionFormatError, SessionHeader
from dsh.session.persistence import StoredSession, encode_events, json_bytes, json_loads, turn_number

from ._files import rfind

HEADER_TYPE = "session/header"
FLUSH_TYPE = "session/flush"
LAYOUT = 2
"""Version of the line layout: 2 marks the end of every flush."""

_RESERVED = frozenset({HEADER_TYPE, FLUSH_TYPE})
_MARKER_START = b'\n{"type":"' + FLUSH_TYPE.encode() + b'"'
_TURN_START = b'\n{"type":"turn/start"'
MAX_HEADER = 1 << 20


def event_lines(header: SessionHeader, events: Sequence[SessionEvent]) -> bytes:
    """The lines of one flush's events (its marker is :func:`marker`)."""
    for event in events:
        if event.type in _RESERVED:
            raise PersistenceError(
                f"event type '{event.type}' of session {header.id} is reserved by the JSONL layout",
                session_id=header.id,
            )
    return b"".join(encode_events(header.id, events, newline=True))


def header_line(header: SessionHeader) -> bytes:
    return json_bytes({"type": HEADER_TYPE, "header": header.to_dict(), "jsonl": LAYOUT}, newline=True)


def marker(count: int | None) -> bytes:
    return json_bytes({"type": FLUSH_TYPE, "events": count}, newline=True)


def _is_marker(raw: bytes) -> bool:
    try:
        obj = json_loads(raw)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == FLUSH_TYPE


@functools.lru_cache(maxsize=256)
def parse_header(raw: bytes, path: str, session_id: str | None) -> tuple[SessionHeader, int]:
    """The header of line 1 and the file's layout version; raise naming the file when damaged.

    ``session_id`` is the session the caller expects (named in the error). Cached: every append re-reads line 1,
    which never changes, and checking it is most of an unsynced append's cost.
    """
    reason = None
    try:
        first = json_loads(raw)
        if not isinstance(first, dict) or first.get("type") != HEADER_TYPE:
            reason = "it is not a 'session/header' line"
        else:
            header = SessionHeader.from_dict(first.get("header"))
            layout = first.get("jsonl", 1)
            if layout.__class__ is not int or layout < 1:
                reason = f"its 'jsonl' layout marker must be a positive integer, not {repr(layout)[:40]}"
            elif layout > LAYOUT:
                raise PersistenceError(
                    f"{path}: its layout {layout} was written by a newer dsh-persistence-jsonl "
                    f"(this one reads up to {LAYOUT}); upgrade",
                    session_id=session_id or header.id,
                )
    except JSONDecodeError:
        reason = "it is not JSON"
    except SessionFormatError as exc:
        reason = exc.problem
        session_id = session_id or exc.session_id
    if reason is not None:
        raise PersistenceError(
            f"{path}: line 1 is not a valid session header ({reason}); the transcript is damaged", session_id=session_id
        )
    return header, layout


def read_header(fd: int, path: str, session_id: str | None) -> tuple[SessionHeader, int, int]:
    """Header, layout and end offset of line 1; raise when damaged or (with ``session_id``) of another
    session."""
    head = os.pread(fd, 4096, 0)
    newline = head.find(b"\n")
    if newline < 0 and len(head) == 4096:
        head = os.pread(fd, MAX_HEADER, 0)
        newline = head.find(b"\n")
    if newline < 0:
        raise PersistenceError(
            f"{path}: line 1 is not a complete session header; the transcript is damaged", session_id=session_id
        )
    header, layout = parse_header(head[:newline], path, session_id)
    if session_id is not None and header.id != session_id:
        raise PersistenceError(
            f"{path}: its header names session {header.id}, not {session_id}; refusing it", session_id=session_id
        )
    return header, layout, newline + 1


def last_flush_end(fd: int, start: int, end: int) -> int | None:
    """End offset of the last complete marker line in ``[start, end)`` of ``fd``, or None when there is none."""
    while True:
        at = rfind(fd, _MARKER_START, start - 1, end)
        if at < 0:
            return None
        line = os.pread(fd, 256, at + 1)
        newline = line.find(b"\n")
        if newline >= 0 and _is_marker(line[:newline]):
            return at + 1 + newline + 1
        end = at + len(_MARKER_START) - 1


def _last_flush_end_in(data: bytes, start: int) -> int | None:
    """:func:`last_flush_end` over bytes already in memory."""
    end = len(data)
    while True:
        at = data.rfind(_MARKER_START, start - 1, end)
        if at < 0:
            return None
        newline = data.find(b"\n", at + 1)
        if newline >= 0 and _is_marker(data[at + 1 : newline]):
            return newline + 1
        end = at + len(_MARKER_START) - 1


def complete_end(fd: int, layout: int, body: int, size: int) -> int:
    """Where the complete flushes of a transcript end (a file from before markers: its last complete line)."""
    end = last_flush_end(fd, body, size) if layout >= LAYOUT else None
    if end is None:
        end = body if layout >= LAYOUT else size
    return end


def last_turn(fd: int, body: int, end: int) -> int | None:
    """The number of the last ``turn/start`` before ``end`` (0 when there is none), reading backwards.

    None when that line cannot be read (a corrupt line): then only a whole load can tell.
    """
    at = rfind(fd, _TURN_START, body - 1, end)
    if at < 0:
        return 0
    line = os.pread(fd, min(end - at - 1, MAX_HEADER), at + 1)
    newline = line.find(b"\n")
    try:
        turn_id = json_loads(line[:newline] if newline >= 0 else line)["data"]["turn_id"]
    except (ValueError, KeyError, TypeError):
        return None
    return turn_number(turn_id)


def parse_transcript(data: bytes, path: str, session_id: str | None) -> StoredSession:
    """Every complete flush of a whole transcript, with the damage found (see the module docstring)."""
    newline = data.find(b"\n")
    if newline < 0:
        raise PersistenceError(
            f"{path}: line 1 is not a complete session header; the transcript is damaged", session_id=session_id
        )
    header, layout = parse_header(data[:newline], path, session_id)
    if session_id is not None and header.id != session_id:
        raise PersistenceError(
            f"{path}: its header names session {header.id}, not {session_id}; refusing it", session_id=session_id
        )
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
    loads, from_dict = json_loads, SessionEvent.from_dict
    for number, raw in enumerate(data[body:end].split(b"\n")[:-1], start=2):
        try:
            obj = loads(raw)
            if obj.get("type") == FLUSH_TYPE:
                expected = obj.get("events")
                if isinstance(expected, int) and expected != in_flush:
                    damage.append(f"{path}: the flush ending at line {number} has {in_flush} of its {expected} lines")
                in_flush = 0
                continue
            in_flush += 1
            events.append(from_dict(obj))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            reason = exc.problem if isinstance(exc, SessionFormatError) else type(exc).__name__
            damage.append(f"{path}: skipped corrupt line {number}: {reason}")
    return StoredSession(header, tuple(events), tuple(damage))
