"""What stays read-only inside a writable root, and the ``bwrap`` options that keep it so.

A confined command must never write what dsh (or the user's shell, git, another agent) later runs
unconfined. Inside each writable root these stay read-only, existing or not:

- the whole of ``DSH_HOME``, and every path this process trusted (:func:`dsh.paths.trusted_paths`:
  the deployment file, hooks files and folders, plugin and skill folders, the sandbox program,
  a SQLite database with its journal files), with every symbolic link on the way to them;
- the root's whole git directory (through a ``gitdir:`` pointer file and its ``commondir`` too), or
  an empty ``.git`` where the root has none (no ``git init`` there), a ``HEAD`` that keeps the root
  from passing for a bare repository, checked-out submodules' ``.git``, and the ``core.hooksPath``
  folder and included files git's config files name (see :func:`git_paths`);
- the agents' hook and settings folders (:data:`AGENT_FOLDERS`);
- agent settings files (:data:`AGENT_FILES`) and shell start-up files (:data:`STARTUP_FILES`) that
  exist in the root; a root that holds the
  user's home (where shells read them, existing or not) is refused instead (see ``_sandbox``);
- whatever the deployment adds (``protect``).

How, with bubblewrap: an existing path is bound read-only over itself. A missing one gets a
read-only placeholder (an empty read-only folder, or ``/dev/null`` for a file), which bubblewrap
mounts on a mount point it makes on the host: an empty folder or file stays behind there, by
design (removing it while another sandbox still holds its mount there would uncover the path in
that sandbox). Every folder between the root and a protected path is bound writable over itself
too: a mount point cannot be renamed or removed, so ``mv .git elsewhere && mkdir .git`` cannot
put an unprotected path in a protected one's place. A symbolic link on that way is refused
(bubblewrap would protect where it leads, not the link, which could then be replaced).
"""

import os
import stat
import subprocess
from collections.abc import Iterable, Sequence
from typing import Final, Literal, NamedTuple

Kind = Literal["dir", "file"]

AGENT_FOLDERS: Final[tuple[str, ...]] = (".claude", ".codex", ".gemini", ".cursor", ".agents", ".github/hooks")
"""Folders where the peer agents (Claude Code, Codex, Gemini CLI, Cursor, Copilot) read hooks and
settings, relative to a root: read-only whole, existing or not."""

AGENT_FILES: Final[tuple[str, ...]] = (".mcp.json",)
"""Agent settings files at a root, read-only where they exist: Claude Code's project MCP servers
(``.mcp.json``: commands it starts, an approved server by its name, so a changed command runs
unasked). Not made when missing: an empty file there would be invalid JSON to the agent."""

STARTUP_FILES: Final[tuple[str, ...]] = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".zlogout",
    ".inputrc",
    ".kshrc",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".logout",
    ".envrc",
)
"""Shell start-up files (and direnv's ``.envrc``), relative to a root: read-only where they exist."""


class Protected(NamedTuple):
    """One path to keep read-only and, when it is missing, the placeholder it gets."""

    path: str
    kind: Kind


class ProtectError(Exception):
    """A protected path the sandbox cannot keep read-only (a symbolic link on its way): nothing runs."""


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def git_paths(root: str) -> list[Protected]:
    """What of ``root``'s own repository stays read-only: the whole git directory (and the common one a
    ``gitdir:`` pointer leads to), its submodules' ``.git``, and what its config names
    (``core.hooksPath``, included files); or ``.git`` when there is none.

    Whole, as Codex keeps it: git reads far more than ``hooks`` and ``config`` there as instructions
    (a planted ``commondir`` moves both elsewhere; a gitlink written into ``index`` makes ``git status``
    recurse into a nested repository of the model's and run its ``core.fsmonitor``).
    """
    dotgit = os.path.join(root, ".git")
    # The root itself must never pass for a bare repository (HEAD, objects/, refs/, config planted
    # in it): git falls back to it when .git is no repository, and a ``git status`` there (a shell
    # prompt's) runs its config's core.fsmonitor. A HEAD that is a read-only folder (empty where
    # there was none; git shows no empty folder) is no valid HEAD.
    head = Protected(os.path.join(root, "HEAD"), "dir")
    info = _lstat(dotgit)
    if info is None:
        return [Protected(dotgit, "dir"), head]
    if stat.S_ISDIR(info.st_mode):
        out, gitdirs = [head], [dotgit]
    elif not stat.S_ISREG(info.st_mode):
        return [Protected(dotgit, "file")]  # a link: refused when the options are built
    else:
        # The pointer itself: re-pointed, it would name a repository of the model's.
        out = [Protected(dotgit, "file"), head]
        gitdirs = []
        gitdir = _pointer(dotgit, "gitdir:")
        if gitdir is not None:
            gitdir = os.path.realpath(os.path.join(root, gitdir))
            gitdirs.append(gitdir)
            common = _pointer(os.path.join(gitdir, "commondir"), "")
            if common is not None:
                gitdirs.append(os.path.realpath(os.path.join(gitdir, common)))
    out += [Protected(gitdir, "dir") for gitdir in gitdirs]
    if gitdirs:
        out += _submodules(root, gitdirs[0])
    configs = [os.path.join(g, name) for g in gitdirs for name in ("config", "config.worktree")]
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    configs += [os.path.expanduser("~/.gitconfig"), os.path.join(xdg, "git", "config"), "/etc/gitconfig"]
    return out + _config_names(root, configs)


def _git(args: Sequence[str], what: str) -> bytes | None:
    """The output of ``git args`` (None: no git here, so nothing runs its hooks); ProtectError when git fails."""
    try:
        done = subprocess.run(
            ["git", *args],
            capture_output=True,
            timeout=10,
            env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
        )
    except FileNotFoundError:
        return None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProtectError(f"git could not read {what} to find what it runs ({exc})") from None
    if done.returncode not in (0, 1):  # 1: no such key (git config)
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        raise ProtectError(f"git could not read {what} to find what it runs ({reason}); fix that file")
    return done.stdout


def _submodules(root: str, gitdir: str) -> list[Protected]:
    """The ``.git`` of each submodule checked out in ``root`` (a gitlink of its index, where ``.gitmodules``
    exists): ``git status`` in the root recurses into them and runs their config's ``core.fsmonitor``."""
    if not os.path.isfile(os.path.join(root, ".gitmodules")):
        return []
    listing = _git(["--git-dir", gitdir, "--work-tree", root, "ls-files", "--stage", "-z"], f"the index of {root}")
    out: list[Protected] = []
    for entry in (listing or b"").split(b"\0"):
        mode, _, rest = entry.partition(b" ")
        if mode != b"160000":
            continue
        path = os.path.join(root, os.fsdecode(rest.partition(b"\t")[2]), ".git")
        info = _lstat(path)
        if info is not None:  # a missing one is a submodule not checked out: the limit the README names
            out.append(Protected(path, "dir" if stat.S_ISDIR(info.st_mode) else "file"))
    return out


GIT_INCLUDE_DEPTH: Final = 10
"""How deep git follows ``include.path`` (its own limit)."""


_CONFIG_CACHE: dict[tuple[str, int, int, int, int], tuple[tuple[str, str], ...]] = {}
"""What each config file said, by its identity and version (a git run costs milliseconds on every call)."""


def _config_entries(config: str) -> tuple[tuple[str, str], ...] | None:
    """The ``(key, value)`` of ``config``'s ``core.hooksPath`` and include paths, as git reads them (None: no git)."""
    info = os.stat(config)
    key = (config, info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)
    if key in _CONFIG_CACHE:
        return _CONFIG_CACHE[key]
    found = _git(
        ["config", "--file", config, "--null", "--get-regexp", r"^(core\.hookspath|include(if\..*)?\.path)$"],
        config,
    )
    if found is None:
        return None
    entries = []
    for entry in found.decode(errors="surrogateescape").split("\0"):
        name, _, value = entry.partition("\n")
        if value:
            entries.append((name, value))
    _CONFIG_CACHE[key] = tuple(entries)
    return _CONFIG_CACHE[key]


def _config_names(root: str, configs: Sequence[str]) -> list[Protected]:
    """What git config files name that git runs or reads as config: ``core.hooksPath`` (relative to
    ``root``, the work tree) and every ``include.path`` / ``includeIf.*.path`` file, followed.

    Husky and the like set ``core.hooksPath`` to a folder of the work tree, and an included file in
    the work tree is config too (``core.fsmonitor``): both run on the host when *you* use git there.
    Read by git itself (``git config --file``), so its syntax is git's; without git, no hook runs.
    """
    out: list[Protected] = []
    pending = [(path, 0) for path in configs]
    seen: set[str] = set()
    while pending:
        config, depth = pending.pop(0)
        if config in seen or depth > GIT_INCLUDE_DEPTH or not os.path.isfile(config):
            continue
        seen.add(config)
        found = _config_entries(config)
        if found is None:
            return out  # no git here: nothing runs its hooks
        for key, value in found:
            value = os.path.expanduser(value)
            if key.lower() == "core.hookspath":
                out.append(Protected(os.path.normpath(os.path.join(root, value)), "dir"))
            else:
                included = os.path.normpath(os.path.join(os.path.dirname(config), value))
                out.append(Protected(included, "file"))
                pending.append((included, depth + 1))
    return out


def _pointer(path: str, prefix: str) -> str | None:
    """The path a git pointer file names (``gitdir: ...``, a ``commondir``), or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            line = handle.readline(4096).strip()
    except OSError:
        return None
    if not line.startswith(prefix):
        return None
    return line[len(prefix) :].strip() or None


def _both(path: str) -> list[str]:
    """``path`` as named (absolute, normalized) and resolved: one entry when they are the same."""
    named = os.path.abspath(os.path.expanduser(path))
    return list(dict.fromkeys((named, os.path.realpath(named))))


def links_on_way(path: str) -> list[str]:
    """Every symbolic link met resolving ``path``, each named where it lies (its folder resolved).

    A path dsh reads or runs later (a ``PATH`` folder, ``DSH_HOME``) is only as fixed as the links it
    passes through: one inside a writable root could be re-pointed by a confined command, and the
    resolved path alone would not show it.
    """
    found: list[str] = []
    pending = os.path.abspath(os.path.expanduser(path)).split("/")
    here = "/"
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            here = os.path.dirname(here)
            continue
        step = os.path.join(here, part)
        info = _lstat(step)
        if info is None or not stat.S_ISLNK(info.st_mode) or hops >= 40:  # 40: the kernel's own bound
            here = step
            continue
        hops += 1
        found.append(step)
        target = os.readlink(step)
        if os.path.isabs(target):
            here = "/"
        pending = target.split("/") + pending
    return found


def _with_links(path: str, kind: Kind) -> list[Protected]:
    """``path`` (named and resolved) as ``kind``, and every link on its way, which must not be re-pointed."""
    return [Protected(p, kind) for p in _both(path)] + [Protected(link, "file") for link in links_on_way(path)]


SQLITE_MAGIC: Final = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def _sqlite_siblings(path: str) -> list[Protected]:
    """The journal files SQLite keeps beside a database ``path`` (``-wal``, ``-shm``, ``-journal``), existing or not.

    They are the database as much as its file is: a ``-wal`` planted beside it is replayed into it
    by the next connection (a trusted session database in a writable root would take a header of
    the model's, and with it another workspace). Empty for a file that is no SQLite database.
    """
    try:
        with open(path, "rb") as handle:
            if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return []
    except OSError:
        return []
    return [Protected(f"{place}{suffix}", "file") for place in _both(path) for suffix in ("-wal", "-shm", "-journal")]


def protected_in(
    roots: Sequence[str], home: str | None, trusted: Iterable[str], extra: Sequence[str]
) -> list[Protected]:
    """Every protected path that lies in (or holds) one of ``roots`` (all resolved, absolute).

    ``home`` is ``DSH_HOME``; ``trusted`` the paths the trust rule passed; ``extra`` the deployment's
    ``protect`` entries (absolute, or relative to each root; a trailing ``/`` makes a missing one a folder).
    """
    wanted: list[Protected] = []
    if home is not None:
        # As named, where it leads and every link on the way: a link inside a root could be
        # re-pointed to a home of the model's (a link in a root is refused when the options are built).
        wanted += _with_links(home, "dir")
    for path in trusted:
        kind: Kind = "file" if os.path.isfile(path) else "dir"
        for place in _with_links(path, kind) + _sqlite_siblings(path):
            if place.kind == "file" or not any(_under(root, place.path) for root in roots):
                # A trusted folder that holds a root is the folder of a trusted file (the trust rule
                # checks it so nobody else can swap the file): the file is protected, the root stays writable.
                wanted.append(place)
    for root in roots:
        wanted += git_paths(root)
        wanted += (Protected(os.path.join(root, name), "dir") for name in AGENT_FOLDERS)
        for name in (*AGENT_FILES, *STARTUP_FILES):
            path = os.path.join(root, name)
            if _lstat(path) is not None:
                wanted.append(Protected(path, "file"))
    for entry in extra:
        kind = "dir" if entry.endswith("/") else "file"
        entry = os.path.expanduser(entry.rstrip("/") or "/")
        if os.path.isabs(entry):
            wanted += _with_links(os.path.normpath(entry), kind)
        else:
            wanted += (Protected(os.path.normpath(os.path.join(root, entry)), kind) for root in roots)
    return [p for p in wanted if any(_under(p.path, root) or _under(root, p.path) for root in roots)]


def protect_options(roots: Sequence[str], wanted: Sequence[Protected]) -> list[str]:
    """The ``bwrap`` options keeping ``wanted`` read-only inside ``roots`` (bound writable before them).

    Raises :class:`ProtectError` naming a symbolic link a protected path is reached through.
    """
    leaves: dict[str, Protected] = {}
    for item in sorted(wanted, key=lambda p: p.path):
        if not any(_under(item.path, other) for other in leaves):  # one inside a protected one is covered
            leaves[item.path] = item
    pinned: dict[str, None] = {}  # folders bound over themselves, in order (shallow first)
    leaf_options: list[str] = []
    for item in leaves.values():
        root = max((r for r in roots if _under(item.path, r)), key=len, default=None)
        if root is None:  # it holds a root: read-only over it, where it exists
            if _lstat(item.path) is not None:
                leaf_options += ["--ro-bind", item.path, item.path]
            continue
        leaf_options += _leaf(root, item, pinned)
    options: list[str] = []
    for folder in pinned:
        options += ["--bind", folder, folder]
    return options + leaf_options


def _leaf(root: str, item: Protected, pinned: dict[str, None]) -> list[str]:
    """The options for one protected path under ``root``; the folders on its way go to ``pinned``."""
    if item.path == root:
        return ["--ro-bind", root, root]
    parts = os.path.relpath(item.path, root).split("/")
    here = root
    for depth, part in enumerate(parts):
        here = os.path.join(here, part)
        last = depth == len(parts) - 1
        info = _lstat(here)
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise ProtectError(
                f"{item.path} must stay read-only in the writable root {root}, but {here} is a symbolic link, "
                "which the sandbox cannot keep from being replaced; replace the link by what it names, or "
                "start the session in a folder without it"
            )
        if info is None and not last:
            # A folder on the way (".github" of ".github/hooks"): made now, like any folder the user
            # could make, so that it is pinned like the others; its protected part comes below.
            os.makedirs(here, exist_ok=True)
            info = os.lstat(here)
        if info is not None and not last:
            pinned[here] = None  # a file where a folder would be is pinned too: nothing is created below it
            if not stat.S_ISDIR(info.st_mode):
                return []
            continue
        if info is not None:
            return ["--ro-bind", here, here]
        if item.kind == "dir":
            return ["--perms", "0555", "--tmpfs", here, "--remount-ro", here]
        return ["--ro-bind", "/dev/null", here]
    return []
