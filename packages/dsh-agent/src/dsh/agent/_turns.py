"""What a turn records of a tool's result (what a turn produces is ``_steps.TurnResult``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh.session import ToolResult
from dsh.session.persistence import json_default


def recorded(result: ToolResult) -> dict[str, Any]:
    """The ``data`` a ``tool/result`` event records and PostToolUse hooks see: JSON-able, ``blocked`` when refused.

    It is what a resumed session reads back, so the live event and the stored one are equal: what
    the store's JSON makes of a value it does not write natively is its ``json_default``'s (a record
    is an object of its fields), and any value the store's JSON would change or refuse is recorded
    as the store reads it back (:func:`_stored`): a tool's odd value never costs the turn or the session.
    """
    data = dict(result.data)
    if result.blocked:
        data["blocked"] = True
    try:
        # The common case (shell tools: a flat dict of strings and numbers) is one walk over its
        # values, returned as it is; encoding it to check would cost a pass over every string.
        plain: dict[str, Any] = _plain(data, 0)
        return plain
    except (_Irregular, RecursionError):
        stored: dict[str, Any] = _stored(data, frozenset(), 0)
        return stored


MAX_DEPTH = 200
"""Nesting kept in recorded data (the store's JSON encoder refuses past 255 levels)."""

_LOWEST, _HIGHEST = -(2**63), 2**64  # the integers the store's JSON holds (both its encoders, dsh.session.persistence)


class _Irregular(Exception):
    """A value the store would not read back as it is: the caller takes the slow, exact path."""


def _plain(value: Any, depth: int) -> Any:
    """A copy of ``value`` with tuples as lists and anything else as the store's ``json_default`` writes it.

    A copy of every container, so the event stays what the tool returned even when the tool later
    changes its own lists and dicts. Raises :class:`_Irregular` at anything the store would change
    or refuse: a key that is not a string, a subclass of ``str``, an integer past 64 bits, a float
    that is not finite, an object JSON does not know, or nesting past :data:`MAX_DEPTH`.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if _LOWEST <= value < _HIGHEST:
            return value
        raise _Irregular
    if kind is float:
        if value - value == 0.0:  # finite: inf - inf and nan - nan are nan
            return value
        raise _Irregular
    if depth >= MAX_DEPTH:
        raise _Irregular
    depth += 1
    if isinstance(value, Mapping):
        copied = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Irregular
            copied[key] = _plain(item, depth)
        return copied
    if kind is tuple or isinstance(value, list):
        return [_plain(item, depth) for item in value]
    try:
        encoded = json_default(value)  # the store's own rule: a record is an object of its fields
    except TypeError:
        raise _Irregular from None
    return _plain(encoded, depth - 1)


def _stored(value: Any, path: frozenset[int], depth: int) -> Any:
    """``value`` as the store reads it back: plain JSON types only, never an error.

    Tuples are lists and what ``json_default`` writes is read back as written; keys become strings as JSON writes them
    (``True`` → ``"true"``, ``None`` → ``"null"``, ``1`` → ``"1"``, ``1.5`` → ``"1.5"``, others their
    ``str()``); an
    integer past 64 bits is its decimal string, a float that is not finite ``None`` (JSON's
    ``null``), an object JSON does not know its ``str()``, a cycle ``"<cycle>"`` and nesting past
    :data:`MAX_DEPTH` ``"<nested too deep>"``.
    """
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value) if _LOWEST <= value < _HIGHEST else str(int(value))
    if isinstance(value, float):
        return float(value) if value - value == 0.0 else None
    if id(value) in path:
        return "<cycle>"
    if depth >= MAX_DEPTH:
        return "<nested too deep>"
    inner, depth = path | {id(value)}, depth + 1
    if isinstance(value, Mapping):
        return {_key(k): _stored(v, inner, depth) for k, v in value.items()}
    if type(value) is tuple or isinstance(value, list):
        return [_stored(v, inner, depth) for v in value]
    try:
        encoded = json_default(value)
    except TypeError:
        return _text(value)
    return _stored(encoded, inner, depth - 1)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return str(key)
    if key is None or isinstance(key, bool):
        return "null" if key is None else ("true" if key else "false")
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float):
        return repr(float(key))
    return _text(key)


def _text(value: object) -> str:
    try:
        return str(value)
    except Exception:  # a third-party __str__ that raises: the value is still recorded, by its type
        return f"<unprintable {type(value).__name__}>"
