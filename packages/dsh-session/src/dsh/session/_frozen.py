"""The base of every session record: immutable values in one tuple, read through properties."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Frozen")

store = object.__setattr__
"""Stores a record's values past its ``__setattr__``, which refuses every change."""


def _restore(cls: type[R], values: tuple[Any, ...]) -> R:
    """Rebuild a record from its field values (pickle and copy), without checking them again."""
    record = object.__new__(cls)
    object.__setattr__(record, "_v", values)
    return record


def _field(index: int) -> Callable[[Frozen], Any]:
    def read(record: Frozen) -> Any:
        return record._v[index]

    return read


class Frozen:
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
