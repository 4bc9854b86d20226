"""The rules of session fields: safe ids, and checkers that return a value or raise naming its field."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from datetime import datetime as _datetime
from typing import Any

from ._errors import InvalidSessionIdError, SessionFormatError
from ._json import json_loads

FORMAT_VERSION = 1
"""Version of the header and event format this code writes and the newest it reads."""
MAX_ID_LENGTH = 128
FAST_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_ID_LENGTH - 1}}}")
"""One match says an id is safe; only a refused id goes through :func:`validate_session_id`'s reasons."""


def is_safe_id(value: object) -> bool:
    """Whether ``value`` passes :func:`validate_session_id`: the one rule for ids dsh puts in paths,
    environment variables and records (session ids, and tool call ids an outside loop supplies)."""
    return isinstance(value, str) and FAST_ID.fullmatch(value) is not None


def validate_session_id(value: object) -> str:
    """Return ``value`` if it is a safe session id, else raise naming what is wrong.

    Ids are 1 to 128 characters of ASCII letters, digits, ``.``, ``_`` and ``-``, starting with a
    letter or digit: no separators, no ``.``/``..``, no control or non-ASCII characters. Checked
    before any path is built from an id.
    """
    if isinstance(value, str) and FAST_ID.fullmatch(value):
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
    """A fresh random session id: a version-4 UUID in its usual text form (``str(uuid.uuid4())``).

    Made from ``os.urandom`` as RFC 4122 says, not by the ``uuid`` module: on Python 3.11 importing it
    imports ``platform`` and asks it for the system, about 4% of a cold ``dsh exec`` that needs one id.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


# -- field rules: each returns the value or raises naming the field ---------------------------------

_KINDS = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def kind(value: object) -> str:
    """How a value's type reads in a message (JSON's words for JSON's types)."""
    kind = _KINDS.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        # A record (a NamedTuple): an object in dsh's JSON, a tuple in Python; "a list" was neither.
        name = type(value).__name__
        return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name} record"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def fail(field: str | None, problem: str, session_id: str | None = None) -> SessionFormatError:
    return SessionFormatError(
        problem if field is None else f"field '{field}' {problem}", field=field, session_id=session_id
    )


TIMESTAMP = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
"""An ISO 8601 date or date and time (``2026-11-30T08:42:05.764711+00:00``), matched with ``re.ASCII``:
ASCII digits and separators only. A pattern ``re`` compiles (and keeps) the first time
:func:`check_timestamp` asks, which a stored timestamp :func:`fast_timestamp` takes never does."""


def fast_timestamp(text: str) -> bool:
    """Whether ``text`` is surely an ISO 8601 timestamp (``datetime.fromisoformat`` of ASCII: four times
    quicker than :data:`TIMESTAMP`, and a header is checked per session listed); False means "ask
    :func:`check_timestamp`", which also takes the forms this does not."""
    if not text.isascii():
        return False
    try:
        _datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def check_timestamp(value: object, field: str, sid: str | None) -> str:
    """An ISO 8601 timestamp: a stored one is printed by ``dsh sessions list``, so no control characters."""
    text = check_string(value, field, sid)
    if not re.fullmatch(TIMESTAMP, text, re.ASCII):
        raise fail(field, f"must be an ISO 8601 timestamp such as 2026-11-30T08:42:05+00:00, not {text[:64]!r}", sid)
    return text


def check_string(value: object, field: str, sid: str | None) -> str:
    if not isinstance(value, str):
        raise fail(field, f"must be a string, not {kind(value)}", sid)
    return value


_UNCLAIMABLE = re.compile(r"[^\x21-\x7e]")


def sanitise_claim(value: object) -> str | None:
    """A value an outer process claims (its ``DSH_SESSION_ID``, its ``DSH_TOOL_CALL_ID``) as a
    header may record it: printable ASCII, any other character as ``?``, at most
    :data:`MAX_ID_LENGTH` characters; None when there is nothing to record. Never trusted as an id."""
    if not isinstance(value, str) or not value:
        return None
    return _UNCLAIMABLE.sub("?", value[:MAX_ID_LENGTH])


def check_claim(value: object, field: str, sid: str | None) -> str:
    """A recorded claim: what :func:`sanitise_claim` returns, else raise naming the field."""
    if not isinstance(value, str):
        raise fail(field, f"must be a string, not {kind(value)}", sid)
    if not value or len(value) > MAX_ID_LENGTH or _UNCLAIMABLE.search(value):
        raise fail(field, f"must be 1 to {MAX_ID_LENGTH} printable ASCII characters, not {value!r}", sid)
    return value


def check_optional_string(value: object, field: str, sid: str | None) -> str | None:
    return None if value is None else check_string(value, field, sid)


def check_session_id(value: object, field: str, sid: str | None) -> str:
    if isinstance(value, str) and FAST_ID.fullmatch(value):
        return value
    try:
        return validate_session_id(value)
    except InvalidSessionIdError as exc:
        raise fail(field, f"is not a safe session id: {exc}", sid) from exc


def check_count(value: object, field: str, sid: str | None) -> int:
    if type(value) is not int or value < 0:  # bool is an int subclass, and no count
        shown = repr(value) if type(value) is int else kind(value)
        raise fail(field, f"must be a non-negative integer, not {shown}", sid)
    return value


def check_absolute_path(value: object, field: str, sid: str | None) -> str:
    path = check_string(value, field, sid)
    if "\x00" in path:
        raise fail(field, "contains a NUL character", sid)
    if not os.path.isabs(path):
        raise fail(field, f"must be an absolute path, not {path!r}", sid)
    return path


def check_version(value: object, sid: str | None) -> int:
    if type(value) is not int or value < 1:
        shown = repr(value) if type(value) is int else kind(value)
        raise fail("version", f"must be a positive integer, not {shown}", sid)
    if value > FORMAT_VERSION:
        raise fail(
            "version",
            f"is {value}, newer than the format {FORMAT_VERSION} this dsh-session reads; upgrade dsh-session",
            sid,
        )
    return value


def now() -> str:
    """Now in UTC, ISO 8601 with microseconds (``2026-11-30T08:42:05.764711+00:00``), without ``datetime``."""
    now = time.time()
    seconds = int(now)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int((now - seconds) * 1e6):06d}+00:00"


def decode_json(text: str | bytes, what: str) -> object:
    """The value of one stored JSON document."""
    try:
        return json_loads(text)
    except ValueError as exc:
        raise fail(None, f"the {what} is not JSON ({exc})") from None


def known_id(data: Mapping[str, Any]) -> str | None:
    """The record's session id when it is present and safe: later messages name the session."""
    value = data.get("id")
    return value if isinstance(value, str) and FAST_ID.fullmatch(value) else None


def as_object(data: object, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise fail(None, f"a {what} must be a JSON object, not {kind(data)}")
    return data
