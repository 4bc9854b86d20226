"""Session headers, events and locations: the records of a transcript, as plain typed classes.

Each record is immutable and checked by hand when it is built, from keyword arguments or from a
decoded JSON object (``from_dict``, ``from_json``); a value that breaks a rule raises
:class:`SessionFormatError` naming the field, and the session once its id is known. They are built
on every ``dsh exec`` and once per stored session by ``dsh sessions list``, so they cost what a few
``isinstance`` checks cost: no validation library is imported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Self

from ._frozen import Frozen, store
from ._json import json_bytes
from ._rules import (
    FAST_ID,
    FORMAT_VERSION,
    as_object,
    check_absolute_path,
    check_count,
    check_session_id,
    check_string,
    check_timestamp,
    check_version,
    decode_json,
    fail,
    fast_timestamp,
    kind,
    known_id,
    now,
)


class _Record(Frozen):
    """A record of the transcript format: a JSON-ready dict of its fields, and checked copies."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, fields in their stored order."""
        return dict(zip(self._order, self._v, strict=True))

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, checked like a new record."""
        build: Callable[..., Self] = type(self)
        return build(**{**self.to_dict(), **changes})


class SessionHeader(_Record):
    """The identity of a session, stored first in its transcript.

    ``id`` and ``parent_session`` are safe session ids (see :func:`validate_session_id`), ``cwd`` an
    absolute path without NUL, the two counts non-negative integers, and ``version`` at most
    :data:`FORMAT_VERSION`. A stored header with a field this version does not know is refused.
    """

    _order = ("id", "created_at", "cwd", "parent_session", "origin", "delegation_depth", "seed_length", "version")
    __slots__ = ()
    _what = "session header"
    _known = frozenset(_order)

    id: str
    created_at: str
    cwd: str
    parent_session: str | None
    origin: str | None
    delegation_depth: int
    seed_length: int
    version: int

    def __init__(
        self,
        *,
        id: str,
        cwd: str,
        created_at: str | None = None,
        parent_session: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
        seed_length: int = 0,
        version: int = FORMAT_VERSION,
    ) -> None:
        # Each rule is tested inline first (the common, valid case) and only a value that fails it
        # goes through the checker that names the problem: a header is built per session listed.
        if id.__class__ is not str or not FAST_ID.fullmatch(id):
            id = check_session_id(id, "id", None)
        if cwd.__class__ is not str or cwd[:1] != "/" or "\x00" in cwd:
            cwd = check_absolute_path(cwd, "cwd", id)
        if created_at is None:
            created_at = now()
        elif created_at.__class__ is not str or not fast_timestamp(created_at):
            created_at = check_timestamp(created_at, "created_at", id)
        if parent_session is not None and (
            parent_session.__class__ is not str or not FAST_ID.fullmatch(parent_session)
        ):
            parent_session = check_session_id(parent_session, "parent_session", id)
        if origin is not None and origin.__class__ is not str:
            origin = check_string(origin, "origin", id)
        if delegation_depth.__class__ is not int or delegation_depth < 0:
            delegation_depth = check_count(delegation_depth, "delegation_depth", id)
        if seed_length.__class__ is not int or seed_length < 0:
            seed_length = check_count(seed_length, "seed_length", id)
        if version.__class__ is not int or version != FORMAT_VERSION:
            version = check_version(version, id)
        store(self, "_v", (id, created_at, cwd, parent_session, origin, delegation_depth, seed_length, version))

    def __hash__(self) -> int:
        return hash(self._v)

    @classmethod
    def from_dict(cls, data: object) -> SessionHeader:
        """Check and build a header from a decoded JSON object (a stored header)."""
        fields = as_object(data, "session header")
        if not cls._known.issuperset(fields):
            field = sorted(str(k) for k in fields if k not in cls._known)[0]
            raise fail(field, f"is not a session header field (known: {', '.join(cls._order)})", known_id(fields))
        if "id" not in fields or "cwd" not in fields:
            raise fail("id" if "id" not in fields else "cwd", "is missing", known_id(fields))
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str | bytes) -> SessionHeader:
        """Check and build a header from its JSON text (see :meth:`from_dict`)."""
        return cls.from_dict(decode_json(text, "session header"))

    def to_json(self) -> str:
        """The header as compact JSON, the form the database backends store (odd strings escaped)."""
        return json_bytes(self.to_dict()).decode()


class SessionEvent(_Record):
    """One transcript event: a non-empty ``type`` (``turn/start``, ``tool/call``, ... or a plugin's own),
    the time it was recorded (seconds since the epoch) and its JSON-able ``data``."""

    _order = ("type", "at", "data")
    __slots__ = ()
    _what = "session event"
    __hash__ = None  # type: ignore[assignment]  # its data is a dict

    type: str
    at: float
    data: dict[str, Any]

    def __init__(self, *, type: str, at: float | None = None, data: dict[str, Any] | None = None) -> None:
        if (type.__class__ is not str or not type) and (not isinstance(type, str) or not type):
            raise fail("type", "must be a non-empty string" + ("" if isinstance(type, str) else f", not {kind(type)}"))
        if at is None:
            at = time.time()
        elif at.__class__ is not float:
            if not isinstance(at, float | int) or at.__class__ is bool:
                raise fail("at", f"of a '{type}' event must be a number, not {kind(at)}")
            at = float(at)
        if data is None:
            data = {}
        elif data.__class__ is not dict and not isinstance(data, dict):
            raise fail("data", f"of a '{type}' event must be an object, not {kind(data)}")
        for key in data:
            if key.__class__ is not str and not isinstance(key, str):
                raise fail("data", f"of a '{type}' event has a key that is not a string: {key!r}")
        store(self, "_v", (type, at, data))

    @classmethod
    def from_dict(cls, data: object) -> SessionEvent:
        """Check and build an event from a decoded JSON object (a stored event).

        Fields other than ``type``, ``at`` and ``data`` are ignored; a missing or null ``at`` is 0.0
        (the time is unknown) and a missing or null ``data`` is empty.
        """
        fields = as_object(data, "session event")
        if "type" not in fields:
            raise fail("type", "is missing")
        at = fields.get("at")
        return cls(type=fields["type"], at=0.0 if at is None else at, data=fields.get("data"))


class SessionLocation(_Record):
    """Where a backend keeps one session's dedicated log: ``kind`` names the representation, ``path`` is absolute."""

    _order = ("kind", "path")
    __slots__ = ()
    _what = "session location"

    kind: str
    path: str

    def __init__(self, *, kind: str, path: str) -> None:
        store(self, "_v", (check_string(kind, "kind", None), check_absolute_path(path, "path", None)))

    def __hash__(self) -> int:
        return hash(self._v)
