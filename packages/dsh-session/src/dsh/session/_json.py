"""Compact JSON for every store: one codec, orjson, and dsh's one rule for what orjson does not write itself.

Records are objects of their fields, other tuples arrays, subclasses of ``str``, ``int``, ``dict`` and
``list`` their base type, NaN and infinities ``null``, ``datetime``/``date``/``time`` written by
``isoformat()`` (orjson hands them to :func:`_native`, as it does dataclasses: its own forms would round
a seconds offset and crash on a dataclass whose slot is unset), a ``UUID`` its canonical string, an
``Enum`` its value, a dataclass an object of its public fields that are set; a string UTF-8 cannot
encode, wherever it sits, escaped (:func:`storable`). Refused with a ``TypeError``: an integer outside
64 bits, a key that is not exactly a ``str``, a float subclass, nesting deeper than 254 levels,
anything else JSON cannot hold. The decoder reads UTF-8 only and refuses ``NaN``, ``Infinity`` and a
lone surrogate; a damaged document is a ``json.JSONDecodeError``. ``tests/test_json_codec.py`` holds
the codec to one corpus.
"""

from __future__ import annotations

import dataclasses
import datetime
from enum import Enum
from typing import Any

import orjson

_MISSING = object()  # a dataclass field with no value
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


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
    if isinstance(data, Enum):  # orjson writes its value itself, so its strings are escaped here
        return storable(data.value)
    return data


def _native(value: object) -> Any:
    """What dsh writes for a value orjson hands back (records, dataclasses, datetimes); else
    :func:`json_default`. Every refusal is a ``TypeError``."""
    cls = value.__class__
    if isinstance(value, tuple):
        return json_default(value)  # a record, the common case
    if cls is datetime.datetime or cls is datetime.date or cls is datetime.time:
        if cls is datetime.time and value.tzinfo is not None:  # type: ignore[attr-defined]
            raise TypeError("datetime.time must not have tzinfo set")
        try:
            return value.isoformat()  # type: ignore[attr-defined]
        except Exception as exc:  # a tzinfo of its own whose utcoffset() fails
            raise TypeError(f"{cls.__name__} {value!r} cannot be written: {exc}") from None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Its public fields that are set (an `init=False` one may not be), in their declared order.
        fields = ((f.name, getattr(value, f.name, _MISSING)) for f in dataclasses.fields(value))
        return {name: item for name, item in fields if item is not _MISSING and not name.startswith("_")}
    return json_default(value)


def _escaped(value: object) -> Any:
    return storable(_native(value))


def json_bytes(obj: object, *, newline: bool = False) -> bytes:
    """Compact UTF-8 JSON of ``obj`` (with a final newline when asked), by the rules of the module doc;
    strings UTF-8 cannot encode are written escaped (:func:`storable`). Raises ``TypeError`` for a value
    JSON cannot hold."""
    option = _OPTIONS | orjson.OPT_APPEND_NEWLINE if newline else _OPTIONS
    try:
        return orjson.dumps(obj, default=_native, option=option)
    except orjson.JSONEncodeError as refused:
        # If only a string UTF-8 cannot encode (a lone surrogate, even inside an enum's value or what
        # `_native` made of a value) stood in the way, escape it rather than lose the turn.
        try:
            return orjson.dumps(storable(obj), default=_escaped, option=option)
        except RecursionError:  # a value holding itself, or nested too deep: refused as it was
            raise refused from None


def json_loads(text: str | bytes) -> Any:
    """The value of one JSON document (UTF-8; ``NaN``, ``Infinity`` and a lone surrogate refused). Every
    damaged document is a ``json.JSONDecodeError``."""
    return orjson.loads(text)
