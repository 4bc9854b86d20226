"""What a turn records of a tool's result (what a turn produces is ``_steps.TurnResult``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsh.session import ToolResult


def recorded(result: ToolResult) -> dict[str, Any]:
    """The ``data`` a ``tool/result`` event records and PostToolUse hooks see: JSON-able, ``blocked`` when refused.

    It is what a resumed session reads back, so the live event and the stored one are equal: a
    record (a ``NamedTuple``) is an object of its fields, a tuple a list, and any other value JSON
    cannot hold (or holds only changed, such as a key that is not a string) is recorded as JSON
    would read it back, an object JSON does not know as its ``str()``.
    """
    data = dict(result.data)
    if result.blocked:
        data["blocked"] = True
    try:
        # The common case (shell tools: a flat dict of strings and numbers) is one walk over its
        # values, returned as it is; encoding it to check would cost a pass over every string.
        plain: dict[str, Any] = _plain(data, strict=True)
        return plain
    except _Irregular:
        return dict(json.loads(json.dumps(_plain(data, strict=False), default=str)))


class _Irregular(Exception):
    """A value JSON would not read back as it is: the caller falls back to a JSON round trip."""


def _plain(value: Any, *, strict: bool) -> Any:
    """``value`` with records as dicts of their fields and tuples as lists; the same object when there are none.

    ``strict``: raise :class:`_Irregular` at anything else JSON would change or refuse (a key that
    is not a string, a subclass of ``str``, an object JSON does not know); otherwise leave it as it is.
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        changed = None
        for key, item in value.items():
            if strict and type(key) is not str:
                raise _Irregular
            new = _plain(item, strict=strict)
            if new is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = new
        return value if changed is None else changed
    if isinstance(value, tuple):
        fields = getattr(value, "_asdict", None)
        if fields is not None:  # a NamedTuple: an object of its fields, as its names say
            return _plain(dict(fields()), strict=strict)
        return [_plain(item, strict=strict) for item in value]
    if kind is list:
        items = [_plain(item, strict=strict) for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if isinstance(value, Mapping):
        return _plain(dict(value), strict=strict)
    if isinstance(value, list):
        return [_plain(item, strict=strict) for item in value]
    if strict:
        raise _Irregular
    return value
