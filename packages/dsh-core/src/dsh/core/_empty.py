"""One empty read-only mapping, the default of the mapping fields of dsh's records."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NoReturn


class _EmptyMapping(Mapping[str, Any]):
    """Empty and read-only, so one instance is safely shared by every record; it pickles and copies
    as itself (``types.MappingProxyType``, the obvious choice, does not pickle)."""

    __slots__ = ()

    def __getitem__(self, key: str) -> NoReturn:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"

    def __reduce__(self) -> str:
        return "EMPTY_MAPPING"  # pickle and copy: the module's one instance


EMPTY_MAPPING: Mapping[str, Any] = _EmptyMapping()
"""The empty read-only mapping (equal to ``{}``); pickles, copies and deep-copies as itself."""
