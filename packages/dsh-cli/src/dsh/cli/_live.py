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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

from dsh.hooks import HOOKS
from dsh.loader import Runtime

from ._fast._choice import DeploymentChoice
from ._runtime import open_runtime


class Watched(NamedTuple):
    """The paths a runtime was read from: each file whole, each folder for its trust only."""

    files: tuple[str, ...]
    """Content, owner and mode count (and whether the file exists at all)."""
    folders: tuple[str, ...]
    """Owner and mode count: a file added beside the deployment file must not cost a boot."""


def watched(runtime: Runtime, path: str | None) -> Watched:
    """What booting ``runtime`` read whose change would change it: the deployment file in effect
    (``path``, if any), the home's default hook files, and every hook file the hooks service loaded
    (plugin folders' included); their folders and the home for trust."""
    home = str(runtime.home)
    hooks_dir = os.path.join(home, "hooks")
    files = [hooks_dir, os.path.join(hooks_dir, "claude.json"), os.path.join(hooks_dir, "codex.json")]
    if path is not None:
        files.append(os.path.abspath(path))
    hooks = runtime.ctx.get(HOOKS)
    if hooks is not None:
        files.extend(os.path.abspath(f) for f in hooks.files())
    folders = [home, *(os.path.dirname(f) for f in files)]
    return Watched(tuple(dict.fromkeys(files)), tuple(dict.fromkeys(folders)))


Stamp = tuple[tuple[int, ...] | None, ...]


def stamp(paths: Watched) -> Stamp:
    """The state of ``paths`` now; two stamps differ when anything a boot read may have changed."""
    return tuple(_state(path, whole=True) for path in paths.files) + tuple(
        _state(path, whole=False) for path in paths.folders
    )


def _state(path: str, *, whole: bool) -> tuple[int, ...] | None:
    """A file's identity, content times, owner and mode (``whole``), or a folder's identity, owner and mode."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if whole:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_uid)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_uid)


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
        self._watched = Watched((), ())
        self._stamp: Stamp = ()
        self._users: dict[int, int] = {}
        self._retired: dict[int, Runtime] = {}
        self._boot()

    def _boot(self) -> Runtime:
        self._retire()
        runtime = self._open(env=self._env, choice=self.choice)
        self._runtime, self._watched = runtime, watched(runtime, self.choice.path)
        self._stamp = stamp(self._watched)
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
    def use(self) -> Iterator[Runtime]:
        """The runtime the files describe now, booted again first if they moved; held until the block ends."""
        runtime = self._boot() if self.changed() else self._runtime
        assert runtime is not None
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
