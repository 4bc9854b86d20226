"""Where an executor's children run: the world a ``DSH_*`` fact must be true in.

A fact such as ``DSH_SESSION_JSONL`` is a path on the harness's own machine. It is handed to a
child only where that path means the same thing: everywhere for a local child, where the sandbox
binds it for a sandboxed one, and on a remote host only under a mount the deployment declares shared.
"""

import os
from typing import Literal, NamedTuple

Access = Literal["none", "read", "write"]
"""What a child can do at a path: nothing (hidden or absent there), read it, or also write it."""

WorldKind = Literal["local", "sandbox", "remote"]


class Mount(NamedTuple):
    """One absolute harness path and what a child can do under it; a later mount wins for its subtree."""

    path: str
    access: Access


class World(NamedTuple):
    """An executor's world (an immutable ``NamedTuple``): what its children see of the harness's files.

    ``mounts`` are read in order, as bubblewrap reads its binds: the last one that covers a path
    decides its access; a path no mount covers is not there (``"none"``). ``workspace`` is the
    access a call's own working directory gets on top of them (a ``workspace-write`` sandbox's
    ``"write"``), and ``hidden`` paths are not there whatever the working directory. ``home`` is
    the ``DSH_HOME`` of that world when the deployment names one of its own (a remote host's);
    None means the harness's home, where it is visible.
    """

    kind: WorldKind
    mounts: tuple[Mount, ...] = (Mount("/", "write"),)
    workspace: Access | None = None
    hidden: tuple[str, ...] = ()
    home: str | None = None
    label: str = "this machine"
    """Names the world in messages: ``this machine``, ``the read-only sandbox``, ``host build:22``."""

    def access(self, path: str, cwd: str | None = None) -> Access:
        """What a child of this world can do at the harness path ``path`` (``cwd``: the session's workspace).

        Outside the local world a path reached through symbolic links is judged at every place its
        lookup passes (:func:`_locations`): each link where it lies and the end where it leads. A home
        linked into ``/tmp`` names nothing in a sandbox whose ``/tmp`` is private, nor does a link
        in ``/tmp`` to a home outside it.
        """
        if self.kind == "local":
            return self._at(os.path.normpath(path), None if cwd is None else os.path.normpath(cwd))
        workspace = None if cwd is None else os.path.realpath(cwd)
        return min((self._at(place, workspace) for place in _locations(path)), key=_RANK.index)

    def _at(self, path: str, cwd: str | None) -> Access:
        found: Access = "none"
        for mount in self.mounts:
            if _under(path, mount.path):
                found = mount.access
        if self.workspace is not None and cwd is not None and _under(path, cwd):
            found = self.workspace
        if any(_under(path, hidden) for hidden in self.hidden):
            return "none"
        return found

    def why_not(self, path: str, cwd: str | None = None) -> str | None:
        """None when a child can read ``path`` at that path, else why not (one clause naming the world)."""
        if self.access(path, cwd) != "none":
            return None
        if self.kind == "remote":
            return f"{path} is on this machine, not on {self.label} (no shared mount declares it)"
        return f"{path} is hidden in {self.label}"


_RANK: tuple[Access, ...] = ("none", "read", "write")


def _locations(path: str) -> list[str]:
    """Where a lookup of ``path`` passes on this machine: each symbolic link on the way, and the end."""
    path = os.path.abspath(path)
    places: dict[str, None] = {}
    prefix = "/"
    for part in path.split("/"):
        if part:
            here = os.path.join(os.path.realpath(prefix), part)
            if os.path.islink(here):
                places[here] = None
            prefix = os.path.join(prefix, part)
    places[os.path.realpath(path)] = None
    return list(places)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


LOCAL_WORLD = World("local")
"""The world of a child on the harness's own machine: every harness path is what it is."""


def world_of(executor: object) -> World:
    """The executor's ``world`` attribute, or :data:`LOCAL_WORLD` for an executor that declares none."""
    world = getattr(executor, "world", None)
    return world if isinstance(world, World) else LOCAL_WORLD
