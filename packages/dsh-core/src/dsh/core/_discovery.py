"""Discovery of plugins through Python entry points, attributed to their distributions.

Choice of library: we read entry points with :mod:`importlib.metadata`, not stevedore.
stevedore's in-process caches never invalidate and its on-disk cache can lag a same-version
reinstall by minutes, and its cached entry points carry no distribution, while we must see
``pip install``/``uninstall`` in a running process and name the owning distribution of every
item. ``importlib.metadata`` re-parses every installed distribution on each scan, so
:meth:`Catalog.refresh` first compares a cheap fingerprint (the modification times of the
``sys.path`` directories, which change when a distribution's ``.dist-info`` is added or
removed) and rescans only when it moved.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._errors import DiscoveryError
from ._fiber import Disposer

PLUGINS_GROUP = "dsh.plugins"
BASH_ENV_GROUP = "dsh.bash_env"
PERSISTENCE_GROUP = "dsh.persistence"
GROUPS: tuple[str, ...] = (PLUGINS_GROUP, BASH_ENV_GROUP, PERSISTENCE_GROUP)


def import_ref(ref: str) -> Any:
    """Import the object a ``module:attr.path`` reference names (errors propagate as raised)."""
    module_name, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module_name.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class EntryPointItem:
    """One discovered entry point and the distribution that ships it."""

    group: str
    name: str
    value: str
    distribution: str
    version: str

    def load(self) -> Any:
        """Import the object the entry point names; raise :class:`DiscoveryError` naming it on failure."""
        try:
            return import_ref(self.value)
        except Exception as exc:
            raise DiscoveryError(
                f"entry point '{self.name}' in group '{self.group}' ({self.value}, from "
                f"{self.distribution} {self.version}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc


@dataclass(frozen=True)
class GroupDiff:
    """What changed in one group between two scans."""

    group: str
    added: tuple[EntryPointItem, ...] = ()
    removed: tuple[EntryPointItem, ...] = ()
    changed: tuple[EntryPointItem, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


@dataclass
class _Scan:
    items: dict[str, dict[str, EntryPointItem]] = field(default_factory=dict)
    conflicts: dict[str, dict[str, str]] = field(default_factory=dict)


def _fingerprint(paths: Iterable[str]) -> tuple[tuple[str, int], ...]:
    out = []
    for entry in paths:
        try:
            out.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            out.append((entry, -1))
    return tuple(out)


def _scan(groups: tuple[str, ...]) -> _Scan:
    scan = _Scan({g: {} for g in groups}, {g: {} for g in groups})
    # entry_points() already lets the first distribution of a name on sys.path shadow the
    # rest, as imports do, and reads only entry_points.txt; metadata is read for our items only.
    every = md.entry_points()
    for group in groups:
        bucket = scan.items[group]
        for ep in every.select(group=group):
            dist = ep.dist
            dist_name = (dist.metadata["Name"] if dist is not None else None) or "<unknown>"
            version = dist.version if dist is not None else "0"
            item = EntryPointItem(group, ep.name, ep.value, dist_name, version)
            other = bucket.get(ep.name)
            if other is not None and other.distribution != dist_name:
                first, second = sorted([f"{other.distribution} {other.version}", f"{dist_name} {version}"])
                scan.conflicts[group][ep.name] = (
                    f"entry point '{ep.name}' in group '{group}' is claimed by two distributions: {first} and {second}"
                )
                continue
            bucket[ep.name] = item
    for group, names in scan.conflicts.items():
        for name in names:
            scan.items[group].pop(name, None)
    return scan


Watcher = Callable[[GroupDiff], None]


class Catalog:
    """The installed entry points of dsh's groups, kept in step by :meth:`refresh`.

    Provided to plugins as the ``catalog`` service. Items are sorted by name in every listing.
    """

    def __init__(self, groups: Iterable[str] = GROUPS) -> None:
        self.groups = tuple(groups)
        self._watchers: dict[str, list[Watcher]] = {g: [] for g in self.groups}
        self._fingerprint = _fingerprint(sys.path)
        self._scan = _scan(self.groups)

    def items(self, group: str) -> list[EntryPointItem]:
        """Every loadable item of ``group``, sorted by name (conflicting names are left out)."""
        return [v for _, v in sorted(self._scan.items.get(group, {}).items())]

    def conflicts(self, group: str) -> Mapping[str, str]:
        """Names claimed by two distributions in ``group``, each with its error message."""
        return dict(sorted(self._scan.conflicts.get(group, {}).items()))

    def names(self, group: str) -> list[str]:
        """Every name in ``group``, conflicting ones included, sorted."""
        return sorted({*self._scan.items.get(group, {}), *self._scan.conflicts.get(group, {})})

    def find(self, group: str, name: str) -> EntryPointItem:
        """Return the item ``name`` of ``group``; raise naming both claimants or the available names."""
        conflict = self._scan.conflicts.get(group, {}).get(name)
        if conflict is not None:
            raise DiscoveryError(conflict)
        item = self._scan.items.get(group, {}).get(name)
        if item is None:
            available = ", ".join(self.names(group)) or "none"
            raise DiscoveryError(f"no entry point '{name}' in group '{group}'; available: {available}")
        return item

    def watch(self, group: str, watcher: Watcher) -> Disposer:
        """Call ``watcher`` with each non-empty diff of ``group``; return a disposer."""
        if group not in self._watchers:
            raise DiscoveryError(f"group '{group}' is not watched by this catalog; groups: {', '.join(self.groups)}")
        self._watchers[group].append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers[group]:
                self._watchers[group].remove(watcher)

        return unwatch

    def refresh(self, *, force: bool = False) -> list[GroupDiff]:
        """Re-read installed distributions if anything on the search path changed; notify watchers.

        ``force`` rescans even when the fingerprint is unchanged (an in-place edit of an
        ``entry_points.txt`` does not touch directory times).
        """
        fingerprint = _fingerprint(sys.path)
        if not force and fingerprint == self._fingerprint:
            return []
        importlib.invalidate_caches()
        new = _scan(self.groups)
        self._fingerprint = fingerprint
        old, self._scan = self._scan, new
        diffs = []
        for group in self.groups:
            before, after = old.items.get(group, {}), new.items.get(group, {})
            diff = GroupDiff(
                group,
                added=tuple(after[n] for n in sorted(after.keys() - before.keys())),
                removed=tuple(before[n] for n in sorted(before.keys() - after.keys())),
                changed=tuple(after[n] for n in sorted(after.keys() & before.keys()) if after[n] != before[n]),
            )
            for item in diff.changed:
                # Drop the stale module so a reinstalled version is imported afresh.
                sys.modules.pop(item.value.partition(":")[0].strip(), None)
            if diff:
                diffs.append(diff)
                for watcher in list(self._watchers[group]):
                    watcher(diff)
        return diffs
