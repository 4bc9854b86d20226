"""Compact JSON for every store: one set of rules, written by two encoders chosen by the size of the work.

A one-shot ``dsh`` command writes a handful of small documents (a header, four or five events, a
flush marker) and reads a line or two. orjson writes an event about ten times faster than the
standard library, but importing it costs about 8 ms, more than a tenth of a cold ``dsh exec``,
because it imports ``dataclasses`` (with ``inspect``, ``ast`` and ``dis``) at its own import. So:

- **point work** (one document, a flush of fewer than :data:`BULK_DOCUMENTS` events, one line read
  back, a listing of fewer sessions) goes through the standard library's ``json``, after
  :func:`_plain` has put the value in the form orjson would write;
- **bulk work** (a flush of :data:`BULK_DOCUMENTS` events or more, a whole transcript, a listing of
  that many sessions) goes through orjson, imported the first time bulk work comes.

Both write the same JSON: records as objects of their fields, other tuples as arrays, subclasses
of ``str``, ``int``, ``dict`` and ``list`` as their base type (their contents, not an overridden
``items()``), NaN and infinities as ``null``, ``datetime``/``date``/``time`` by ``isoformat()``, a
``UUID`` as its canonical string, an ``Enum`` as its value, a dataclass as an object of its public
fields that are set; a string UTF-8 cannot encode, wherever it sits, escaped (:func:`storable`).
Both refuse the same values with a ``TypeError``: an integer outside 64 bits, a key that is not
exactly a ``str``, a float subclass, nesting deeper than orjson's 254 levels (counted as orjson
counts them, see :func:`_plain`), anything else JSON cannot hold. The one difference is the
spelling of some floats (``1e-05`` and ``0.00001``), never their value. The choice depends on the
count alone, so encoding the same events twice gives the same bytes (PostgreSQL's
unconfirmed-flush check relies on it). The point path recurses one frame a level, so it needs
about 260 frames of headroom below the interpreter's limit. ``tests/test_json_codec.py`` holds
the two encoders, and the two decoders (:func:`json_loads`, :func:`bulk_loads`), to one corpus.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from collections.abc import Callable
from enum import Enum
from typing import Any

BULK_DOCUMENTS = 64
"""Bulk work from this many documents (the events of one flush, the headers of one listing): orjson's
speed then pays for its import."""


def is_bulk(documents: int) -> bool:
    """Whether work on this many documents together (a flush's events, a listing's headers) is bulk work."""
    return documents >= BULK_DOCUMENTS


_LOWEST, _HIGHEST = -(2**63), 2**64 - 1  # the integers orjson writes
_DEPTH = 254  # the nesting orjson writes
_MISSING = object()  # a dataclass field with no value
_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False, separators=(",", ":"))


def json_default(value: object) -> Any:
    """What dsh's JSON makes of a value neither encoder writes itself: a record (a ``NamedTuple``) is an
    object of its fields (``_asdict()``; its records in turn), another ``tuple`` subclass a list.

    The one rule for records in JSON, so a record in a tool's ``data`` or an event needs no special
    case. Raises ``TypeError`` naming the type of anything else. (Stdlib ``json`` on its own writes a
    ``NamedTuple`` as an array: a record that must be an object goes through :func:`json_bytes`.)
    """
    if isinstance(value, tuple):
        fields = getattr(value, "_asdict", None)
        return list(value) if fields is None else fields()
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def storable(data: Any) -> Any:
    """``data`` with every string UTF-8 cannot encode replaced by an escaped, readable form.

    A lone surrogate (a byte that was not UTF-8 in a command line or environment, decoded with
    ``surrogateescape``, or an unpaired ``\\ud800`` from a model or hook) makes a JSON encoder
    refuse the whole flush; :func:`json_bytes` retries with this so the turn is kept, the odd
    character written as ``\\udce9``. Records become what :func:`json_default` makes of them;
    everything else is returned as it is.
    """
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return data.encode("utf-8", "backslashreplace").decode("utf-8")
        return data
    if isinstance(data, dict):
        return {storable(k): storable(v) for k, v in data.items()}
    if isinstance(data, tuple) and data.__class__ is not tuple:
        return storable(json_default(data))
    if isinstance(data, list | tuple):
        return [storable(v) for v in data]
    return data


def _plain(value: object, depth: int, defaults: int = 0, level: bool = True) -> object:
    """``value`` with only the types the standard library's encoder writes as orjson does (see the module doc).

    Depth is counted as orjson counts it: each ``dict`` and ``list`` is a level (254 at most), except
    one that :func:`_native` made of a value, which stands where that value stood (``level`` False);
    254 values inside one another may go through :func:`_native` (``defaults``). Loops, not
    comprehensions: one frame a level. Subclasses of ``dict`` and ``list`` are read through
    ``dict.items`` and ``list.__iter__``, their contents, as orjson reads them.
    """
    cls = value.__class__
    if cls is str or cls is bool or value is None:
        return value
    if isinstance(value, int):
        if not _LOWEST <= value <= _HIGHEST:
            raise TypeError("Integer exceeds 64-bit range")
        return value if cls is int else int.__int__(value)
    if cls is float:
        return value if math.isfinite(value) else None  # type: ignore[arg-type]
    if isinstance(value, str):
        return str.__str__(value)  # the string itself: a `(str, Enum)` member's str() is its name
    if isinstance(value, dict):
        if level:
            if depth >= _DEPTH:
                raise TypeError("Recursion limit reached")
            depth += 1
        plain = {}
        for key, item in dict.items(value):
            if key.__class__ is not str:
                raise TypeError("Dict key must be str")
            plain[key] = _plain(item, depth, defaults)
        return plain
    if isinstance(value, list) or cls is tuple:
        if level:
            if depth >= _DEPTH:
                raise TypeError("Recursion limit reached")
            depth += 1
        items = []
        for item in list.__iter__(value) if isinstance(value, list) else value:  # type: ignore[attr-defined]
            items.append(_plain(item, depth, defaults))
        return items
    if defaults >= _DEPTH:
        raise TypeError("default serializer exceeds recursion limit")
    return _plain(_native(value), depth, defaults + 1, False)


def _native(value: object) -> Any:
    """What dsh writes for a value beyond JSON's own types, for both encoders (orjson hands it records,
    dataclasses and datetimes); else :func:`json_default`. Every refusal is a ``TypeError``.

    ``datetime`` and ``uuid`` are looked up in ``sys.modules``, not imported: a value of theirs means
    its module is loaded already, and a cold command need not load them for the values it writes.
    """
    cls = value.__class__
    if isinstance(value, tuple):
        return json_default(value)  # a record, the common case
    if isinstance(value, Enum):
        return value.value
    clock = sys.modules.get("datetime")
    if clock is not None and (cls is clock.datetime or cls is clock.date or cls is clock.time):
        if cls is clock.time and value.tzinfo is not None:  # type: ignore[attr-defined]
            raise TypeError("datetime.time must not have tzinfo set")
        try:
            return value.isoformat()  # type: ignore[attr-defined]
        except Exception as exc:  # a tzinfo of its own whose utcoffset() fails
            raise TypeError(f"{cls.__name__} {value!r} cannot be written: {exc}") from None
    ids = sys.modules.get("uuid")
    if ids is not None and cls is ids.UUID:
        return str(value)
    if getattr(cls, "__dataclass_fields__", None) is not None and not isinstance(value, type):
        import dataclasses  # loaded already: the value's class is a dataclass

        # Its public fields that are set (an `init=False` one may not be), in their declared order.
        fields = ((f.name, getattr(value, f.name, _MISSING)) for f in dataclasses.fields(value))  # type: ignore[arg-type]
        return {name: item for name, item in fields if item is not _MISSING and not name.startswith("_")}
    return json_default(value)


_orjson_module: Any = None


def _orjson() -> Any:
    """orjson, imported the first time bulk work asks for it (see the module doc), then kept at hand:
    a listing asks once a header."""
    global _orjson_module
    if _orjson_module is None:
        import orjson

        _orjson_module = orjson
    return _orjson_module


def _options(orjson: Any, newline: bool) -> int:
    # Dataclasses and datetimes go to `_native`, as the standard library's path does: one rule for
    # both (orjson's own would write `__dict__`, round a seconds offset and crash on a dataclass whose
    # slot is unset).
    passthrough = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    return passthrough | (orjson.OPT_APPEND_NEWLINE if newline else 0)  # type: ignore[no-any-return]


def bulk_encoder(*, newline: bool = False) -> Callable[[object], bytes]:
    """The encoder of bulk work, for a loop over many documents: :func:`json_bytes` with ``bulk``,
    minus its per-call set-up, and without its retry: a ``TypeError`` from it means "ask
    :func:`json_bytes`", which escapes what UTF-8 cannot hold and otherwise refuses the same way."""
    orjson = _orjson()
    return functools.partial(orjson.dumps, default=_native, option=_options(orjson, newline))


def json_bytes(obj: object, *, newline: bool = False, bulk: bool = False) -> bytes:
    """Compact UTF-8 JSON of ``obj`` (with a final newline when asked), by the rules of the module doc;
    strings UTF-8 cannot encode are written escaped (:func:`storable`).

    ``bulk`` (a document of bulk work) writes it with orjson, importing it on first use. Raises
    ``TypeError`` for a value JSON cannot hold.
    """
    if bulk:
        orjson = _orjson()
        option = _options(orjson, newline)
        try:
            return orjson.dumps(obj, default=_native, option=option)  # type: ignore[no-any-return]
        except orjson.JSONEncodeError:
            # Refused: say why as the point path does, and if only a string UTF-8 cannot encode (a lone
            # surrogate, even inside an enum's value) stood in the way, escape it rather than lose the turn.
            escaped = storable(_plain(obj, 0))
            return orjson.dumps(escaped, option=option)  # type: ignore[no-any-return]
    plain = _plain(obj, 0)
    text = _ENCODER.encode(plain)
    if newline:
        text += "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # as the bulk path: the odd character escaped
        text = _ENCODER.encode(storable(plain))
        return (text + "\n" if newline else text).encode("utf-8")


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number is infinity when parsed as double: {text[:40]}")
    return value


def _integer(text: str) -> int | float:
    value = int(text)
    return value if _LOWEST <= value <= _HIGHEST else _finite(text)  # orjson reads a wider one as a float


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite, parse_int=_integer)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _surrogate_in(value: object) -> bool:
    if isinstance(value, str):
        return not value.isascii() and any("\ud800" <= c <= "\udfff" for c in value)
    if isinstance(value, dict):
        return any(_surrogate_in(k) or _surrogate_in(v) for k, v in value.items())
    return isinstance(value, list) and any(_surrogate_in(v) for v in value)


def json_loads(text: str | bytes) -> Any:
    """The value of one JSON document (point work: a header, one line read back) by the standard library,
    read as orjson reads it.

    UTF-8 only; ``NaN``, ``Infinity``, a number too large for a float and a lone surrogate (raw or
    escaped) refused; an integer outside 64 bits read as a float. Every damaged document is a
    ``json.JSONDecodeError`` (what orjson's own error is), invalid UTF-8 and nesting too deep for the
    interpreter (about 1,000 levels, where orjson reads 1,024) included.
    """
    try:
        if isinstance(text, bytes | bytearray | memoryview):
            text = bytes(text).decode("utf-8")  # `json.loads` of bytes would also take UTF-16 and UTF-32
        elif not isinstance(text, str):
            raise ValueError(f"Input must be bytes, bytearray, memoryview, or str, not {type(text).__name__}")
        elif not text.isascii():
            text.encode("utf-8")  # a lone surrogate in the text itself
        value = _DECODER.decode(text)
        if _SURROGATE_ESCAPE.search(text) and _surrogate_in(value):
            raise ValueError("a lone surrogate in a string")
        return value
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise json.JSONDecodeError(str(exc) or type(exc).__name__, "", 0) from None


def bulk_loads() -> Callable[[str | bytes], Any]:
    """The decoder of bulk work: ``orjson.loads``, for a whole transcript or a listing of
    :data:`BULK_DOCUMENTS` sessions or more.

    Imports orjson on first use. Its ``JSONDecodeError`` is a ``json.JSONDecodeError``.
    """
    return _orjson().loads  # type: ignore[no-any-return]
