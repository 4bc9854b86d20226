"""What a rescan found changed in one group; imported when the installed distributions moved.

A cold command whose fingerprint matches the discovery cache never rescans, so never defines this.
"""

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ._discovery import EntryPointItem


class GroupDiff(NamedTuple):
    """What changed in one group between two scans (an immutable ``NamedTuple``; false when nothing did)."""

    group: str
    added: "tuple[EntryPointItem, ...]" = ()
    removed: "tuple[EntryPointItem, ...]" = ()
    changed: "tuple[EntryPointItem, ...]" = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)
