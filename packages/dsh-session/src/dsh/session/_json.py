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
of ``str``, ``int``, ``dict`` and ``list`` as their base type, NaN and infinities as ``null``,
``datetime``/``date``/``time`` in ISO 8601, a ``UUID`` as its canonical string, an ``Enum`` as its
value, a dataclass as an object of its public fields; and both refuse the same values (an integer
outside 64 bits, a key that is not a string, a float subclass, nesting deeper than 254, anything
else JSON cannot hold) with a ``TypeError``. The spelling of some floats differs (``1e-05`` and
``0.00001``), never their value. The choice depends on the count alone, so encoding the
same events twice gives the same bytes (PostgreSQL's unconfirmed-flush check relies on it).
``tests/test_json_codec.py`` holds the two to one corpus.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable
from enum import Enum
from typing import Any

BULK_DOCUMENTS = 64
"""Bulk work from this many documents (the events of one flush, the headers of one listing): orjson's
speed then pays for its import."""

_LOWEST, _HIGHEST = -(2**63), 2**64 - 1  # the integers orjson writes
_DEPTH = 254  # the nesting orjson writes
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


def _plain(value: object, depth: int) -> object:
    """``value`` with only the types the standard library's encoder writes as orjson does (see the module doc)."""
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
    if depth >= _DEPTH:
        raise TypeError("Recursion limit reached")
    depth += 1
    if isinstance(value, dict):
        plain = {}
        for key, item in value.items():
            if key.__class__ is not str:
                raise TypeError("Dict key must be str")
            plain[key] = _plain(item, depth)
        return plain
    if isinstance(value, list) or cls is tuple:
        return [_plain(item, depth) for item in value]  # type: ignore[attr-defined]
    return _plain(_native(value), depth)


def _native(value: object) -> Any:
    """What orjson writes natively beyond JSON's own types, as plain values; else :func:`json_default`.

    ``datetime`` and ``uuid`` are looked up in ``sys.modules``, not imported: a value of theirs means
    its module is loaded already, and a cold command need not load them for the values it writes.
    """
    cls = value.__class__
    if isinstance(value, tuple):
        return json_default(value)  # a record, the common case
    if isinstance(value, Enum):
        return value.value
    clock = sys.modules.get("datetime")
    if clock is not None and (cls is clock.datetime or cls is clock.date):
        return value.isoformat()  # type: ignore[attr-defined]
    if clock is not None and cls is clock.time:
        if value.tzinfo is not None:  # type: ignore[attr-defined]
            raise TypeError("datetime.time must not have tzinfo set")
        return value.isoformat()  # type: ignore[attr-defined]
    ids = sys.modules.get("uuid")
    if ids is not None and cls is ids.UUID:
        return str(value)
    if getattr(cls, "__dataclass_fields__", None) is not None and not isinstance(value, type):
        import dataclasses  # loaded already: the value's class is a dataclass

        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if not f.name.startswith("_")}  # type: ignore[arg-type]
    return json_default(value)


def _orjson() -> Any:
    """orjson, imported the first time bulk work asks for it (see the module doc)."""
    import orjson

    return orjson


def bulk_encoder(*, newline: bool = False) -> Callable[[object], bytes]:
    """The encoder of bulk work, for a loop over many documents: :func:`json_bytes` with ``bulk``,
    minus its per-call set-up, and without its retry: a ``TypeError`` from it means "ask
    :func:`json_bytes`", which escapes what UTF-8 cannot hold and otherwise refuses the same way."""
    orjson = _orjson()
    return functools.partial(orjson.dumps, default=_native, option=orjson.OPT_APPEND_NEWLINE if newline else 0)


def json_bytes(obj: object, *, newline: bool = False, bulk: bool = False) -> bytes:
    """Compact UTF-8 JSON of ``obj`` (with a final newline when asked), by the rules of the module doc;
    strings UTF-8 cannot encode are written escaped (:func:`storable`).

    ``bulk`` (a document of bulk work) writes it with orjson, importing it on first use. Raises
    ``TypeError`` for a value JSON cannot hold.
    """
    if bulk:
        orjson = _orjson()
        option = orjson.OPT_APPEND_NEWLINE if newline else 0
        try:
            return orjson.dumps(obj, default=_native, option=option)  # type: ignore[no-any-return]
        except orjson.JSONEncodeError as exc:
            # A string UTF-8 cannot encode (a lone surrogate) must not cost the turn: escape it.
            try:
                escaped = storable(obj)
            except RecursionError:  # nested deeper than JSON is written: the first refusal stands
                raise exc from None
            return orjson.dumps(escaped, default=_native, option=option)  # type: ignore[no-any-return]
    text = _ENCODER.encode(_plain(obj, 0))
    if newline:
        text += "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json_bytes(storable(obj), newline=newline)  # as the bulk path: the odd character escaped


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def json_loads(text: str | bytes) -> Any:
    """The value of one JSON document (point work: a header, one line read back) by the standard library.

    Refuses what orjson refuses that ``json`` alone would take (``NaN``, ``Infinity``), and raises
    ``json.JSONDecodeError`` (what orjson's own error is) for every damaged document: invalid
    UTF-8, nesting too deep for the interpreter, an integer too long to read.
    """
    try:
        # UTF-8 only, as orjson reads (`json.loads` of bytes would also take UTF-16 and UTF-32).
        return _DECODER.decode(text.decode("utf-8") if isinstance(text, bytes) else text)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise json.JSONDecodeError(str(exc) or type(exc).__name__, "", 0) from None


def bulk_loads() -> Callable[[str | bytes], Any]:
    """The decoder of bulk work (a whole transcript, every header of a listing): ``orjson.loads``.

    Imports orjson on first use. Its ``JSONDecodeError`` is a ``json.JSONDecodeError``.
    """
    return _orjson().loads  # type: ignore[no-any-return]
