"""A read-only dict: the default of the mapping fields of dsh's records, and bash-env's snapshots."""

from __future__ import annotations

from typing import Any, NoReturn


class ReadOnlyDict(dict[str, Any]):
    """A ``dict`` whose mutators raise ``TypeError``: safely shared, yet a dict to everything that reads
    one (``json``, ``orjson``, ``|``, ``copy()``, ``isinstance(x, dict)``). It pickles and copies as a
    ``ReadOnlyDict`` of the same items, and the empty one as :data:`EMPTY_MAPPING` itself.

    ``types.MappingProxyType``, the obvious choice, neither pickles nor encodes as JSON.
    """

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("this mapping is read-only: build a new one (dict(m) | {...})")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __repr__(self) -> str:
        return f"ReadOnlyDict({dict.__repr__(self)})"

    def __reduce__(self) -> str | tuple[Any, ...]:
        if self is EMPTY_MAPPING:
            return "EMPTY_MAPPING"  # pickle and copy: the module's one empty instance
        return (ReadOnlyDict, (dict(self),))

    def __copy__(self) -> ReadOnlyDict:
        return self  # immutable: a copy is itself

    def __deepcopy__(self, memo: dict[int, Any]) -> ReadOnlyDict:
        if not self:
            return self
        import copy

        return ReadOnlyDict(copy.deepcopy(dict(self), memo))


EMPTY_MAPPING: ReadOnlyDict = ReadOnlyDict()
"""The empty read-only dict (equal to ``{}``); pickles and copies as itself."""
