"""Discovery of plugins through Python entry points, attributed to their distributions.

Choice of library: we read entry points with :mod:`importlib.metadata`, not stevedore.
stevedore's in-process caches never invalidate and its on-disk cache can lag a same-version
reinstall by minutes, and its cached entry points carry no distribution, while we must see
``pip install``/``uninstall`` in a running process and name the owning distribution of every
item. ``importlib.metadata`` re-parses every installed distribution on each scan, so
:meth:`Catalog.refresh` first compares a cheap fingerprint and rescans only when it moved.
The fingerprint watches only what an install changes: the distribution metadata entries
(``*.dist-info``, ``*.egg-info``, ``*.pth``) of each ``sys.path`` directory, by name, inode and
modification time. A directory's own modification time only says when to list it again, so a
``sys.path`` entry that changes all the time (the working directory, ``/tmp``) costs a listing,
never a rescan.
"""

import importlib
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from dsh.core import Disposer, describe

from ._contain import contained
from ._errors import DiscoveryError

PLUGINS_GROUP = "dsh.plugins"
"""Plugins a deployment names by entry-point name (the loader's own group)."""

GROUP_PREFIX = "dsh."
"""Every entry-point group whose name starts with this is dsh's; each package owns its own."""


Fingerprint = tuple[tuple[str, object], ...]
"""The installed distributions as :class:`Catalog` watches them: each ``sys.path`` entry, in order, with
the name, inode and modification time of every ``*.dist-info``, ``*.egg-info`` and ``*.pth`` entry in it
(a frozenset; None for a missing entry, ``(inode, mtime)`` for a zip file). Any install, uninstall or
reinstall moves it."""

Row = tuple[str, ...]
"""One scanned entry point as plain text: ``("I", group, name, value, distribution, version, installed)``
for an item, ``("L", ...)`` for one left out because another distribution, installed first, has its name."""


class EntryPointMemo(Protocol):
    """Remembers what a scan found for a :data:`Fingerprint`, between processes (the seam a command's
    start-up uses to skip :mod:`importlib.metadata`; the loader's default is none: it scans).

    ``get`` answers the rows stored for exactly this fingerprint, or None (never raises); ``put``
    stores them (a failure to store costs speed only, never raises).
    """

    def get(self, fingerprint: Fingerprint) -> Sequence[Row] | None:
        """The rows a scan found for ``fingerprint``, or None when they are not known."""
        ...

    def put(self, fingerprint: Fingerprint, rows: Sequence[Row]) -> None:
        """Remember ``rows`` as what a scan finds for ``fingerprint``."""
        ...


def import_ref(ref: str) -> Any:
    """Import the object a ``module:attr.path`` reference names (errors propagate as raised)."""
    module_name, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module_name.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


class EntryPointItem(NamedTuple):
    """One discovered entry point and the distribution that ships it (an immutable ``NamedTuple``).

    ``installed`` is when that distribution was installed (the modification time of its metadata
    directory, in nanoseconds; 0 when unknown): where two distributions claim one name or one key,
    the one installed first keeps it.
    """

    group: str
    name: str
    value: str
    distribution: str
    version: str
    installed: int = 0

    def who(self) -> str:
        """``dist 1.0``: the distribution as messages name it."""
        return f"{self.distribution} {self.version}"

    def load(self) -> Any:
        """Import the object the entry point names; raise :class:`DiscoveryError` naming it on failure."""
        try:
            # SystemExit and the like at import are this distribution's failure, not the command's.
            return contained(lambda: import_ref(self.value))
        except Exception as exc:
            raise DiscoveryError(
                f"entry point '{self.name}' in group '{self.group}' ({self.value}, from "
                f"{self.distribution} {self.version}) failed to load: {describe(exc)}",
                group=self.group,
                name=self.name,
            ) from exc


class Lost(NamedTuple):
    """An entry point left out because another distribution, installed first, has one of its name."""

    item: EntryPointItem
    kept: EntryPointItem
    message: str


class GroupDiff(NamedTuple):
    """What changed in one group between two scans (an immutable ``NamedTuple``; false when nothing did)."""

    group: str
    added: tuple[EntryPointItem, ...] = ()
    removed: tuple[EntryPointItem, ...] = ()
    changed: tuple[EntryPointItem, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def lost(item: EntryPointItem, kept: EntryPointItem) -> Lost:
    """``item`` left out for ``kept``, with the message that names both."""
    return Lost(
        item,
        kept,
        f"entry point '{item.name}' in group '{item.group}' is claimed by two distributions: "
        f"{kept.who()} (installed first) keeps it, {item.who()} is left out "
        "(the first installed wins; uninstall one of them to choose)",
    )


def first_installed(items: Iterable[EntryPointItem]) -> list[EntryPointItem]:
    """``items`` in install order, first installed first (ties and unknown times by name, then distribution)."""
    return sorted(items, key=lambda i: (i.installed or float("inf"), i.name, i.distribution))


class _Scan:
    """One scan's items and the ones left out, per group: filled in while scanning (mutable state, a slotted class)."""

    __slots__ = ("items", "lost")

    def __init__(self) -> None:
        self.items: dict[str, dict[str, EntryPointItem]] = {}
        self.lost: dict[str, list[Lost]] = {}


_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".pth")


def _metadata_entries(directory: str) -> frozenset[tuple[str, int, int]]:
    """The distribution metadata in ``directory``: what ``pip install``/``uninstall`` adds, removes or rewrites."""
    out = set()
    try:
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.name.endswith(_METADATA_SUFFIXES):
                    try:
                        st = entry.stat()
                    except OSError:
                        continue
                    out.add((entry.name, st.st_ino, st.st_mtime_ns))
    except OSError:
        pass
    return frozenset(out)


class _PathWatch:
    """A fingerprint of the installed distributions on ``sys.path`` that moves only when they do."""

    def __init__(self) -> None:
        # entry -> (the directory's mtime when last listed, its metadata entries)
        self._seen: dict[str, tuple[int, frozenset[tuple[str, int, int]] | None]] = {}

    def fingerprint(self, paths: Iterable[str]) -> Fingerprint:
        # One stat per entry when nothing moved: `dsh serve` takes this at every turn.
        out: list[tuple[str, object]] = []
        for entry in paths:
            directory = entry or "."
            try:
                st = os.stat(directory)
            except OSError:
                out.append((entry, None))
                continue
            if not stat.S_ISDIR(st.st_mode):  # a zip or egg file: its own time is its content's
                out.append((entry, (st.st_ino, st.st_mtime_ns)))
                continue
            seen = self._seen.get(entry)
            if seen is None or seen[0] != st.st_mtime_ns:
                seen = self._seen[entry] = (st.st_mtime_ns, _metadata_entries(directory))
            out.append((entry, seen[1]))
        return tuple(out)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _installed_at(dist: Any, name: str, version: str, listings: dict[str, dict[str, int]]) -> int:
    """When ``dist`` was installed: the modification time (ns) of its ``.dist-info``/``.egg-info``
    directory, 0 when it cannot be found. ``listings`` caches each folder's metadata entries."""
    try:
        folder = os.fspath(dist.locate_file(""))
    except (AttributeError, NotImplementedError, TypeError):
        return 0
    found = listings.get(folder)
    if found is None:
        found = listings[folder] = {}
        for entry, _, mtime in _metadata_entries(folder):
            stem, dot, suffix = entry.rpartition(".")
            if dot and suffix in ("dist-info", "egg-info"):
                found[_normal(stem)] = mtime
    return found.get(_normal(f"{name}-{version}"), 0)


def _scan() -> _Scan:
    import importlib.metadata as md  # with email and zipfile: only when a scan runs (no memo answered)

    scan = _Scan()
    # entry_points() already lets the first distribution of a name on sys.path shadow the
    # rest, as imports do, and reads only entry_points.txt; metadata is read for our items only,
    # once per distribution.
    every = md.entry_points()
    owners: dict[int, tuple[str, str, int]] = {}
    listings: dict[str, dict[str, int]] = {}
    for group in sorted(g for g in every.groups if g.startswith(GROUP_PREFIX)):
        claims: dict[str, list[EntryPointItem]] = {}
        for ep in every.select(group=group):
            dist = ep.dist
            owner = owners.get(id(dist))
            if owner is None:
                name = (dist.metadata["Name"] if dist is not None else None) or "<unknown>"
                version = dist.version if dist is not None else "0"
                installed = 0 if dist is None else _installed_at(dist, name, version, listings)
                owner = owners[id(dist)] = (name, version, installed)
            item = EntryPointItem(group, ep.name, ep.value, *owner)
            same = claims.setdefault(ep.name, [])
            if all(other.distribution != item.distribution for other in same):
                same.append(item)
        bucket = scan.items.setdefault(group, {})
        for name, items in claims.items():
            kept, *rest = first_installed(items)
            bucket[name] = kept
            scan.lost.setdefault(group, []).extend(lost(item, kept) for item in rest)
    return scan


def _row(item: EntryPointItem) -> Row:
    return (item.group, item.name, item.value, item.distribution, item.version, str(item.installed))


def _item(row: Row) -> EntryPointItem:
    group, name, value, distribution, version, installed = row
    return EntryPointItem(group, name, value, distribution, version, int(installed))


def _rows(scan: _Scan) -> list[Row]:
    rows: list[Row] = []
    for bucket in scan.items.values():
        rows += [("I", *_row(i)) for i in bucket.values()]
    for losses in scan.lost.values():
        rows += [("L", *_row(loss.item)) for loss in losses]
    return rows


def _from_rows(rows: Sequence[Row]) -> _Scan:
    scan = _Scan()
    for row in rows:
        if row[0] == "I":
            item = _item(row[1:])
            scan.items.setdefault(item.group, {})[item.name] = item
    for row in rows:
        kept = scan.items.get(row[1], {}).get(row[2])
        if row[0] == "L" and kept is not None:
            scan.lost.setdefault(row[1], []).append(lost(_item(row[1:]), kept))
    return scan


Watcher = Callable[[GroupDiff], None]


class Catalog:
    """The installed entry points of every ``dsh.*`` group, kept in step by :meth:`refresh`.

    Provided to plugins as the ``catalog`` service. Items are sorted by name in every listing;
    each package names its own group (``dsh.plugins`` here, ``dsh.persistence`` in dsh-session,
    ``dsh.bash_env`` in dsh-bash-env).

    Discovery reads :mod:`importlib.metadata` whenever the installed distributions are scanned. A
    ``memo`` (:class:`EntryPointMemo`) may answer for the installed distributions instead, by their
    :attr:`fingerprint`: the ``dsh`` command hands in one that keeps the scan in a file of its home.
    """

    def __init__(self, memo: EntryPointMemo | None = None) -> None:
        self._watchers: dict[str, list[Watcher]] = {}
        self._watch = _PathWatch()
        self._memo = memo
        # The fingerprint is taken before the scan: an install racing the scan moves it, so the
        # next process rescans rather than trusting what this one half saw.
        self._fingerprint = self._watch.fingerprint(sys.path)
        rows = None if memo is None else memo.get(self._fingerprint)
        if rows is not None:
            self._scan = _from_rows(rows)
        else:
            self._scan = _scan()
            self._remember()

    @property
    def fingerprint(self) -> Fingerprint:
        """The installed distributions this catalog reflects (see :data:`Fingerprint`)."""
        return self._fingerprint

    def _remember(self) -> None:
        if self._memo is not None:
            self._memo.put(self._fingerprint, _rows(self._scan))

    def groups(self) -> list[str]:
        """Every ``dsh.*`` group with at least one installed entry point, sorted."""
        return sorted(self._scan.items)

    def items(self, group: str) -> list[EntryPointItem]:
        """Every loadable item of ``group``, sorted by name (of a name two distributions claim, the one
        installed first)."""
        return [v for _, v in sorted(self._scan.items.get(group, {}).items())]

    def lost(self, group: str) -> list[Lost]:
        """The entry points of ``group`` left out because a distribution installed first has one of
        their name, sorted by name and distribution; each with its message naming both."""
        return sorted(self._scan.lost.get(group, ()), key=lambda loss: (loss.item.name, loss.item.distribution))

    def conflicts(self, group: str) -> Mapping[str, str]:
        """Names of ``group`` two distributions claim, each with the message of the one left out."""
        return {loss.item.name: loss.message for loss in self.lost(group)}

    def names(self, group: str) -> list[str]:
        """Every name in ``group``, sorted."""
        return sorted(self._scan.items.get(group, {}))

    def find(self, group: str, name: str) -> EntryPointItem:
        """Return the item ``name`` of ``group`` (the first installed of a claimed name); raise naming
        the available names."""
        item = self._scan.items.get(group, {}).get(name)
        if item is None:
            available = ", ".join(self.names(group)) or "none"
            raise DiscoveryError(
                f"no entry point '{name}' in group '{group}'; available: {available}", group=group, name=name
            )
        return item

    def watch(self, group: str, watcher: Watcher) -> Disposer:
        """Call ``watcher`` with each non-empty diff of ``group``; return a disposer."""
        if not group.startswith(GROUP_PREFIX):
            raise DiscoveryError(
                f"group '{group}' is not a dsh group (names start with '{GROUP_PREFIX}')", group=group, name=""
            )
        self._watchers.setdefault(group, []).append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers[group]:
                self._watchers[group].remove(watcher)

        return unwatch

    def moved(self) -> bool:
        """Whether anything on the search path changed since the last scan (what :meth:`refresh` looks at
        first: one ``stat`` per ``sys.path`` entry when nothing did)."""
        return self._watch.fingerprint(sys.path) != self._fingerprint

    def refresh(self, *, force: bool = False) -> list[GroupDiff]:
        """Re-read installed distributions if anything on the search path changed; notify watchers.

        ``force`` rescans even when the fingerprint is unchanged (an in-place edit of an
        ``entry_points.txt`` does not touch directory times).
        """
        fingerprint = self._watch.fingerprint(sys.path)
        if not force and fingerprint == self._fingerprint:
            return []
        importlib.invalidate_caches()
        new = _scan()
        self._fingerprint = fingerprint
        old, self._scan = self._scan, new
        self._remember()
        diffs = []
        for group in sorted({*old.items, *new.items, *old.lost, *new.lost}):
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
            if diff or old.lost.get(group, []) != new.lost.get(group, []):  # who is left out moved too
                for watcher in list(self._watchers.get(group, ())):
                    watcher(diff)
        return diffs
