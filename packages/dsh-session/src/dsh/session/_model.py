"""Session headers, events and locations: the records of a transcript, as plain typed classes.

Each record is immutable and checked by hand when it is built, from keyword arguments or from a
decoded JSON object (``from_dict``, ``from_json``); a value that breaks a rule raises
:class:`SessionFormatError` naming the field, and the session once its id is known. They are built
on every ``dsh exec`` and once per stored session by ``dsh sessions list``, so they cost what a few
``isinstance`` checks cost: no validation library is imported.
"""

import time
from typing import Any, NamedTuple, Self

from ._json import json_bytes
from ._rules import (
    FAST_ID,
    FORMAT_VERSION,
    MAX_ID_LENGTH,
    as_object,
    check_absolute_path,
    check_claim,
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

_new = tuple.__new__
"""Builds a checked record from its values in field order: ``super().__new__`` costs one more Python call
(the NamedTuple's generated ``__new__``), about 10% of a header, and ``dsh sessions list`` builds one per session."""


class _HeaderFields(NamedTuple):
    id: str
    created_at: str
    cwd: str
    parent_session: str | None
    origin: str | None
    delegation_depth: int
    seed_length: int
    version: int
    outer_session: str | None
    outer_call: str | None


_CLAIM_FIELDS = ("outer_session", "outer_call")
"""Written only when set, so a header without them reads in a dsh-session that predates them."""


class SessionHeader(_HeaderFields):
    """The identity of a session, stored first in its transcript.

    ``id`` and ``parent_session`` are safe session ids (see :func:`validate_session_id`), ``cwd`` an
    absolute path without NUL, the two counts non-negative integers, and ``version`` at most
    :data:`FORMAT_VERSION`. A stored header with a field this version does not know is refused.

    ``outer_session`` and ``outer_call`` are what the process that started this session claimed as
    its own session and tool call (a ``dsh`` run inside another dsh's shell: that shell's
    ``DSH_SESSION_ID`` and ``DSH_TOOL_CALL_ID``), recorded as claimed (printable ASCII, at most
    128 characters, see :func:`dsh.session.sanitise_claim`) and trusted for nothing: unlike
    ``parent_session`` (a subagent's or a fork's parent, which this harness made) they may name a
    session that does not exist or is not this store's.
    """

    __slots__ = ()

    def __new__(
        cls,
        *,
        id: str,
        cwd: str,
        created_at: str | None = None,
        parent_session: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
        seed_length: int = 0,
        version: int = FORMAT_VERSION,
        outer_session: str | None = None,
        outer_call: str | None = None,
    ) -> Self:
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
        if outer_session is not None:
            outer_session = check_claim(outer_session, "outer_session", id)
        if outer_call is not None:
            outer_call = check_claim(outer_call, "outer_call", id)
        fields = (id, created_at, cwd, parent_session, origin, delegation_depth, seed_length, version)
        return _new(cls, (*fields, outer_session, outer_call))

    def __getnewargs_ex__(self) -> tuple[tuple[()], dict[str, Any]]:
        # Pickle and copy call ``__new__`` with these, so its keywords rebuild (and check) the copy.
        return (), self._asdict()

    @classmethod
    def from_dict(cls, data: object) -> "SessionHeader":
        """Check and build a header from a decoded JSON object (a stored header)."""
        fields = as_object(data, "session header")
        if not _HEADER_FIELDS.issuperset(fields):
            field = sorted(str(k) for k in fields if k not in _HEADER_FIELDS)[0]
            raise fail(field, f"is not a session header field (known: {', '.join(cls._fields)})", known_id(fields))
        if "id" not in fields or "cwd" not in fields:
            raise fail("id" if "id" not in fields else "cwd", "is missing", known_id(fields))
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str | bytes) -> "SessionHeader":
        """Check and build a header from its JSON text (see :meth:`from_dict`)."""
        return cls.from_dict(decode_json(text, "session header"))

    def to_dict(self) -> dict[str, Any]:
        """The header as a JSON-ready dict, fields in their stored order (the outer claim only when set)."""
        data = self._asdict()
        for field in _CLAIM_FIELDS:
            if data[field] is None:
                del data[field]
        return data

    def to_json(self) -> str:
        """The header as compact JSON, the form the database backends store (odd strings escaped)."""
        return json_bytes(self.to_dict()).decode()

    @property
    def lineage_parent(self) -> str | None:
        """The session this one's agent answers to, as ``DSH_PARENT_SESSION_ID`` names it: the
        spawning session of a subagent, else the outer session a nested run claimed when that claim
        is a well-formed id (a malformed claim stays in the header only), else None."""
        if self.origin == "subagent":
            return self.parent_session
        claim = self.outer_session
        if claim is not None and len(claim) <= MAX_ID_LENGTH and FAST_ID.fullmatch(claim):
            return claim
        return None

    def replace(self, **changes: Any) -> "SessionHeader":
        """A copy with ``changes`` applied, checked like a new header (``_replace`` checks nothing)."""
        return SessionHeader(**{**self._asdict(), **changes})


_HEADER_FIELDS = frozenset(SessionHeader._fields)


class _EventFields(NamedTuple):
    type: str
    at: float
    data: dict[str, Any]


class SessionEvent(_EventFields):
    """One transcript event: a non-empty ``type`` (``turn/start``, ``tool/call``, ... or a plugin's own),
    the time it was recorded (seconds since the epoch) and its JSON-able ``data``."""

    __slots__ = ()

    def __new__(cls, *, type: str, at: float | None = None, data: dict[str, Any] | None = None) -> Self:
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
        return _new(cls, (type, at, data))

    def __getnewargs_ex__(self) -> tuple[tuple[()], dict[str, Any]]:
        # Pickle and copy call ``__new__`` with these, so its keywords rebuild (and check) the copy.
        return (), self._asdict()

    @classmethod
    def from_dict(cls, data: object) -> "SessionEvent":
        """Check and build an event from a decoded JSON object (a stored event).

        Fields other than ``type``, ``at`` and ``data`` are ignored; a missing or null ``at`` is 0.0
        (the time is unknown) and a missing or null ``data`` is empty.
        """
        fields = as_object(data, "session event")
        if "type" not in fields:
            raise fail("type", "is missing")
        at = fields.get("at")
        return cls(type=fields["type"], at=0.0 if at is None else at, data=fields.get("data"))

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON-ready dict, fields in their stored order."""
        return self._asdict()

    def replace(self, **changes: Any) -> "SessionEvent":
        """A copy with ``changes`` applied, checked like a new event (``_replace`` checks nothing)."""
        return SessionEvent(**{**self._asdict(), **changes})


class _LocationFields(NamedTuple):
    kind: str
    path: str


class SessionLocation(_LocationFields):
    """Where a backend keeps one session's dedicated log: ``kind`` names the representation, ``path`` is absolute."""

    __slots__ = ()

    def __new__(cls, *, kind: str, path: str) -> Self:
        return super().__new__(cls, check_string(kind, "kind", None), check_absolute_path(path, "path", None))

    def __getnewargs_ex__(self) -> tuple[tuple[()], dict[str, Any]]:
        # Pickle and copy call ``__new__`` with these, so its keywords rebuild (and check) the copy.
        return (), self._asdict()

    def to_dict(self) -> dict[str, Any]:
        """The location as a JSON-ready dict: ``kind`` and ``path``."""
        return self._asdict()

    def replace(self, **changes: Any) -> "SessionLocation":
        """A copy with ``changes`` applied, checked like a new location (``_replace`` checks nothing)."""
        return SessionLocation(**{**self._asdict(), **changes})
