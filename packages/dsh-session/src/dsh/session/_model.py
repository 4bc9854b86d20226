"""Session headers, events and locations: the records of a transcript, as plain typed classes.

Each record is immutable and checked by hand when it is built, from keyword arguments or from a
decoded JSON object (``from_dict``, ``from_json``); a value that breaks a rule raises
:class:`SessionFormatError` naming the field, and the session once its id is known. They are built
on every ``dsh exec`` and once per stored session by ``dsh sessions list``, so they cost what a few
``isinstance`` checks cost: no validation library is imported.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar

import orjson

from ._errors import InvalidSessionIdError, SessionFormatError
from ._json import json_bytes

FORMAT_VERSION = 1
"""Version of the header and event format this code writes and the newest it reads."""
MAX_ID_LENGTH = 128
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FAST_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_ID_LENGTH - 1}}}")
"""One match says an id is safe; only a refused id goes through :func:`validate_session_id`'s reasons."""

R = TypeVar("R", bound="_Frozen")


def validate_session_id(value: object) -> str:
    """Return ``value`` if it is a safe session id, else raise naming what is wrong.

    Ids are 1 to 128 characters of ASCII letters, digits, ``.``, ``_`` and ``-``, starting with a
    letter or digit: no separators, no ``.``/``..``, no control or non-ASCII characters. Checked
    before any path is built from an id.
    """
    if isinstance(value, str) and _FAST_ID.fullmatch(value):
        return value
    if not isinstance(value, str):
        raise InvalidSessionIdError(f"session id must be a string, not {type(value).__name__}", session_id=value)
    if not value:
        raise InvalidSessionIdError("session id is empty", session_id=value)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidSessionIdError(
            f"session id is {len(value)} characters long; the limit is {MAX_ID_LENGTH}", session_id=value
        )
    bad = next((c for c in value if not (c.isascii() and (c.isalnum() or c in "._-"))), value[0])
    raise InvalidSessionIdError(
        f"session id {value!r} has a disallowed character {bad!r}; "
        "use ASCII letters, digits, '.', '_' and '-', starting with a letter or digit",
        session_id=value,
    )


def new_session_id() -> str:
    """A fresh random session id: a version-4 UUID in its usual text form.

    Built from ``os.urandom`` as ``uuid.uuid4`` does; importing ``uuid`` costs a cold command
    milliseconds.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# -- field rules: each returns the value or raises naming the field ---------------------------------

_KINDS = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def _kind(value: object) -> str:
    """How a value's type reads in a message (JSON's words for JSON's types)."""
    kind = _KINDS.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _fail(field: str | None, problem: str, session_id: str | None = None) -> SessionFormatError:
    return SessionFormatError(
        problem if field is None else f"field '{field}' {problem}", field=field, session_id=session_id
    )


def _string(value: object, field: str, sid: str | None) -> str:
    if not isinstance(value, str):
        raise _fail(field, f"must be a string, not {_kind(value)}", sid)
    return value


def _optional_string(value: object, field: str, sid: str | None) -> str | None:
    return None if value is None else _string(value, field, sid)


def _session_id(value: object, field: str, sid: str | None) -> str:
    if isinstance(value, str) and _FAST_ID.fullmatch(value):
        return value
    try:
        return validate_session_id(value)
    except InvalidSessionIdError as exc:
        raise _fail(field, f"is not a safe session id: {exc}", sid) from exc


def _count(value: object, field: str, sid: str | None) -> int:
    if type(value) is not int or value < 0:  # bool is an int subclass, and no count
        shown = repr(value) if type(value) is int else _kind(value)
        raise _fail(field, f"must be a non-negative integer, not {shown}", sid)
    return value


def _absolute_path(value: object, field: str, sid: str | None) -> str:
    path = _string(value, field, sid)
    if "\x00" in path:
        raise _fail(field, "contains a NUL character", sid)
    if not os.path.isabs(path):
        raise _fail(field, f"must be an absolute path, not {path!r}", sid)
    return path


def _version(value: object, sid: str | None) -> int:
    if type(value) is not int or value < 1:
        shown = repr(value) if type(value) is int else _kind(value)
        raise _fail("version", f"must be a positive integer, not {shown}", sid)
    if value > FORMAT_VERSION:
        raise _fail(
            "version",
            f"is {value}, newer than the format {FORMAT_VERSION} this dsh-session reads; upgrade dsh-session",
            sid,
        )
    return value


def _now() -> str:
    """Now in UTC, ISO 8601 with microseconds (``2026-11-30T08:42:05.764711+00:00``), without ``datetime``."""
    now = time.time()
    seconds = int(now)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int((now - seconds) * 1e6):06d}+00:00"


# -- the records ------------------------------------------------------------------------------------

_set = object.__setattr__
"""Stores a record's values past its ``__setattr__``, which refuses every change."""


def _restore(cls: type[R], values: tuple[Any, ...]) -> R:
    """Rebuild a record from its field values (pickle and copy), without checking them again."""
    record = object.__new__(cls)
    object.__setattr__(record, "_v", values)
    return record


def _field(index: int) -> Callable[[_Frozen], Any]:
    def read(record: _Frozen) -> Any:
        return record._v[index]

    return read


class _Frozen:
    """An immutable record: its field values in one tuple, read through one property per field.

    One tuple is stored per record rather than one slot per field: building a record is then one
    store, which is most of what listing 10,000 sessions costs after JSON parsing. Subclasses name
    their fields in ``_order``, declare ``__slots__ = ()`` and store ``_v`` once in ``__init__``.
    Equality and hashing are by type and field values; ``repr`` names every field.
    """

    __slots__ = ("_v",)
    _v: tuple[Any, ...]
    _order: ClassVar[tuple[str, ...]] = ()
    """The fields in their stored order."""
    _what: ClassVar[str] = "record"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for index, name in enumerate(cls.__dict__.get("_order", ())):
            setattr(cls, name, property(_field(index), doc=f"The {name.replace('_', ' ')}."))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a {self._what} is immutable; build a new one to change '{name}'")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a {self._what} is immutable; '{name}' cannot be deleted")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._v == other._v

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(self._order, self._v, strict=True))
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return _restore, (type(self), self._v)


class _Record(_Frozen):
    """A record of the transcript format: a JSON-ready dict of its fields, and checked copies."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, fields in their stored order."""
        return dict(zip(self._order, self._v, strict=True))

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, checked like a new record."""
        build: Callable[..., Self] = type(self)
        return build(**{**self.to_dict(), **changes})


def _decode(text: str | bytes, what: str) -> object:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise _fail(None, f"the {what} is not JSON ({exc})") from None


def _known_id(data: Mapping[str, Any]) -> str | None:
    """The record's session id when it is present and safe: later messages name the session."""
    value = data.get("id")
    return value if isinstance(value, str) and _FAST_ID.fullmatch(value) else None


def _as_object(data: object, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _fail(None, f"a {what} must be a JSON object, not {_kind(data)}")
    return data


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
        if id.__class__ is not str or not _FAST_ID.fullmatch(id):
            id = _session_id(id, "id", None)
        if cwd.__class__ is not str or cwd[:1] != "/" or "\x00" in cwd:
            cwd = _absolute_path(cwd, "cwd", id)
        if created_at is None:
            created_at = _now()
        elif created_at.__class__ is not str:
            created_at = _string(created_at, "created_at", id)
        if parent_session is not None and (
            parent_session.__class__ is not str or not _FAST_ID.fullmatch(parent_session)
        ):
            parent_session = _session_id(parent_session, "parent_session", id)
        if origin is not None and origin.__class__ is not str:
            origin = _string(origin, "origin", id)
        if delegation_depth.__class__ is not int or delegation_depth < 0:
            delegation_depth = _count(delegation_depth, "delegation_depth", id)
        if seed_length.__class__ is not int or seed_length < 0:
            seed_length = _count(seed_length, "seed_length", id)
        if version.__class__ is not int or version != FORMAT_VERSION:
            version = _version(version, id)
        _set(self, "_v", (id, created_at, cwd, parent_session, origin, delegation_depth, seed_length, version))

    def __hash__(self) -> int:
        return hash(self._v)

    @classmethod
    def from_dict(cls, data: object) -> SessionHeader:
        """Check and build a header from a decoded JSON object (a stored header)."""
        fields = _as_object(data, "session header")
        if not cls._known.issuperset(fields):
            field = sorted(str(k) for k in fields if k not in cls._known)[0]
            raise _fail(field, f"is not a session header field (known: {', '.join(cls._order)})", _known_id(fields))
        if "id" not in fields or "cwd" not in fields:
            raise _fail("id" if "id" not in fields else "cwd", "is missing", _known_id(fields))
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str | bytes) -> SessionHeader:
        """Check and build a header from its JSON text (see :meth:`from_dict`)."""
        return cls.from_dict(_decode(text, "session header"))

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
            raise _fail(
                "type", "must be a non-empty string" + ("" if isinstance(type, str) else f", not {_kind(type)}")
            )
        if at is None:
            at = time.time()
        elif at.__class__ is not float:
            if not isinstance(at, float | int) or at.__class__ is bool:
                raise _fail("at", f"of a '{type}' event must be a number, not {_kind(at)}")
            at = float(at)
        if data is None:
            data = {}
        elif data.__class__ is not dict and not isinstance(data, dict):
            raise _fail("data", f"of a '{type}' event must be an object, not {_kind(data)}")
        for key in data:
            if key.__class__ is not str and not isinstance(key, str):
                raise _fail("data", f"of a '{type}' event has a key that is not a string: {key!r}")
        _set(self, "_v", (type, at, data))

    @classmethod
    def from_dict(cls, data: object) -> SessionEvent:
        """Check and build an event from a decoded JSON object (a stored event).

        Fields other than ``type``, ``at`` and ``data`` are ignored; a missing or null ``at`` is 0.0
        (the time is unknown) and a missing or null ``data`` is empty.
        """
        fields = _as_object(data, "session event")
        if "type" not in fields:
            raise _fail("type", "is missing")
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
        _set(self, "_v", (_string(kind, "kind", None), _absolute_path(path, "path", None)))

    def __hash__(self) -> int:
        return hash(self._v)
