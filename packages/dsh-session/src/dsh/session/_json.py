"""Compact JSON with the one escape every store applies (a leaf: the records and the codec both use it)."""

from __future__ import annotations

from typing import Any

import orjson


def json_default(value: object) -> Any:
    """What dsh's JSON makes of a value orjson does not write itself: a record (a ``NamedTuple``) is an
    object of its fields (``_asdict()``; its records in turn), another ``tuple`` subclass a list.

    The one rule for records in JSON, so a record in a tool's ``data`` or an event needs no special
    case. Raises ``TypeError`` naming the type of anything else. (Stdlib ``json`` writes a
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


def json_bytes(obj: object, *, newline: bool = False) -> bytes:
    """Compact UTF-8 JSON of ``obj`` (with a final newline when asked), records as objects of their
    fields (:func:`json_default`), strings UTF-8 cannot encode escaped.

    Raises ``orjson.JSONEncodeError`` (a ``TypeError``) for a value JSON cannot hold.
    """
    # orjson: serialising events is most of a flush's CPU time; it writes compact UTF-8 directly.
    option = orjson.OPT_APPEND_NEWLINE if newline else 0
    try:
        return orjson.dumps(obj, default=json_default, option=option)
    except orjson.JSONEncodeError:
        # A string UTF-8 cannot encode (a lone surrogate) must not cost the turn: escape it.
        return orjson.dumps(storable(obj), default=json_default, option=option)
