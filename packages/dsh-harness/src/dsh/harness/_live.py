"""A long-lived process's runtime, booted again when a file it was read from changes.

A cold ``dsh exec`` reads the deployment file, the hook files and their trust on every command. A
server that booted once would go on enforcing what they said when it started: a guard hook added
later never ran, a hooks file made world-writable still ran its hooks, a switch to the sandbox
executor was ignored. So before each request ``dsh serve`` asks :meth:`LiveRuntime.use`, which
looks at what its runtime was read from (a few ``stat`` calls) and, when any of it moved, boots
the deployment again: the files' verdict now, a refusal included, is the request's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from dsh.hooks import hook_runner
from dsh.loader import Runtime
from dsh.paths.deployment import DeploymentChoice

from ._runtime import open_runtime

Watched = tuple[str, ...]
"""The paths a runtime was read from, and every folder above each (see :func:`watched`)."""


def watched(runtime: Runtime, path: str | None) -> Watched:
    """What booting ``runtime`` read whose change would change it: the deployment file in effect
    (``path``, or the home's ``deployment.yaml`` that would take over from the built-in one), the
    home's hooks folder, and every path the hooks service loaded or trusted (hook files, each
    installed dialect's file in that folder whether it is there yet or not,
    Claude Code plugin folders, their ``skills`` and data folders); and every folder above each,
    since trust is the whole walk's (:func:`dsh.paths.check_trusted`)."""
    home = str(runtime.home)
    hooks_dir = os.path.join(home, "hooks")
    paths = [home, hooks_dir]
    paths.append(os.path.abspath(path) if path is not None else os.path.join(home, "deployment.yaml"))
    hooks = hook_runner(runtime.ctx)
    if hooks is not None:
        paths.extend(os.path.abspath(f) for f in hooks.tables.files())
    walk: dict[str, None] = {}
    for each in paths:
        walk.update(dict.fromkeys(str(folder) for folder in reversed(Path(each).parents)))
        walk[each] = None
    return tuple(walk)


Stamp = tuple[tuple[int, ...] | None, ...]


def stamp(paths: Watched) -> Stamp:
    """The state of ``paths`` now; two stamps differ when anything a boot read may have changed."""
    return tuple(map(_state, paths))


def _state(path: str) -> tuple[int, ...] | None:
    """A path as trust and content see it: a link's own owner and its target's state; a folder's
    identity, owner and mode (what is added inside it does not count: its files are watched
    themselves); a file's identity, size, times, owner and mode; None when it is missing."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.stat(path)
        except OSError:
            return (st.st_ino, st.st_uid, st.st_ctime_ns)
        return (st.st_ino, st.st_uid, st.st_ctime_ns, *_kind(target))
    return _kind(st)


def _kind(st: os.stat_result) -> tuple[int, ...]:
    if stat.S_ISDIR(st.st_mode):
        return (st.st_dev, st.st_ino, st.st_mode, st.st_uid)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_uid)


def stamp_across(before: Mapping[str, tuple[int, ...] | None], paths: Watched) -> Stamp:
    """The stamp of a boot that read ``paths``, taking each path's state from ``before`` (looked at
    before the boot began) where it was looked at: a hook file edited after the boot read it then
    differs from its stamp at the next look, instead of being taken as what was loaded."""
    now = stamp(paths)
    return tuple(before.get(path, state) for path, state in zip(paths, now, strict=True))


class LiveRuntime:
    """The runtime of one ``choice``, booted at once and again whenever :func:`stamp` moves.

    A runtime still in use when a newer one boots is closed when its last user is done. A boot that
    fails raises to the request that asked, and the next request tries again: nothing is served
    from the runtime the files no longer describe.
    """

    def __init__(
        self,
        choice: DeploymentChoice,
        env: Mapping[str, str] | None = None,
        *,
        opener: Callable[..., Runtime] = open_runtime,
    ) -> None:
        self.choice = choice
        self._env = env
        self._open = opener
        self._runtime: Runtime | None = None
        self._watched: Watched = ()
        self._stamp: Stamp = ()
        self._users: dict[int, int] = {}
        self._retired: dict[int, Runtime] = {}
        self._boot()

    def _boot(self) -> Runtime:
        self._retire()
        before = dict(zip(self._watched, stamp(self._watched), strict=True))  # what the last boot read, now
        runtime = self._open(env=self._env, choice=self.choice)
        self._runtime, self._watched = runtime, watched(runtime, self.choice.path)
        self._stamp = stamp_across(before, self._watched)
        return runtime

    def _retire(self) -> None:
        old, self._runtime = self._runtime, None
        if old is None:
            return
        if self._users.get(id(old)):
            self._retired[id(old)] = old
        else:
            old.close()

    @property
    def runtime(self) -> Runtime | None:
        """The newest runtime (None after a boot that failed)."""
        return self._runtime

    def changed(self) -> bool:
        """Whether a file the runtime was read from moved since it booted (or the last boot failed)."""
        return self._runtime is None or stamp(self._watched) != self._stamp

    @contextmanager
    def use(self, on_boot: Callable[[], None] | None = None) -> Iterator[Runtime]:
        """The runtime the files describe now, booted again first if they moved (``on_boot`` is told
        first); held until the block ends."""
        runtime = self._runtime
        if runtime is None or self.changed():
            if on_boot is not None:
                on_boot()
            runtime = self._boot()
        key = id(runtime)
        self._users[key] = self._users.get(key, 0) + 1
        try:
            yield runtime
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key]
                retired = self._retired.pop(key, None)
                if retired is not None:
                    retired.close()

    def close(self) -> None:
        """Close the newest runtime (runtimes still in use close when their users are done)."""
        self._retire()

    def __enter__(self) -> LiveRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
