"""The one trust rule for what dsh keeps in its home, after OpenSSH's ``StrictModes``.

A directory or file dsh trusts (the home, ``run/``, ``hooks/``, a hook or deployment file) must be
owned by the current user (or by root, as OpenSSH allows) and must not be writable by group or
others: anyone else who can write there could plant a socket, a hook or a plugin reference that
then runs with the user's credentials. What dsh creates it creates private (directories 0700,
files 0600) whatever the process umask.

The folders above a trusted path count too (OpenSSH walks them as well): each must be owned by the
user or root, and one writable by group or others must have the sticky bit (as ``/tmp`` has), or
someone else could rename the trusted path away and put their own in its place between the check
and the use.

The path is walked one component at a time from ``/``, each opened relative to the descriptor of
the folder before it and never through a symbolic link (``O_NOFOLLOW``), and every check is made
on what was opened (``fstat``), so no check can be about another file than the one used. A
symbolic link on the way is followed only when it is owned by the user or root: a link someone
else owns, as the home in sticky ``/tmp`` or anywhere above it, is theirs to re-point at any
moment (systems without ``fs.protected_symlinks`` follow it for root too), so it is refused.
"""

from __future__ import annotations

import errno
import os
import stat

from ._errors import UntrustedPathError
from ._read import refuse_irregular

__all__ = [
    "check_trusted",
    "create_private_file",
    "ensure_private_dir",
    "open_trusted",
    "read_trusted_text",
    "trust_fault",
    "trusted_paths",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# O_PATH (Linux) opens a folder without needing read permission on it (a root-owned 0711 folder);
# elsewhere a folder is opened for reading, which the walk needs anyway.
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_ANY_FLAGS = getattr(os, "O_PATH", os.O_RDONLY | os.O_NONBLOCK) | os.O_NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC
_MAX_LINKS = 40  # as Linux's own limit on links followed in one lookup (ELOOP)

_TRUSTED: set[str] = set()
"""Every path a trusted walk of this process opened (as given and as resolved): see :func:`trusted_paths`."""


def trusted_paths() -> frozenset[str]:
    """Every path this process trusted so far (checked or opened by the trust rule), as given and resolved.

    What passed the rule is what dsh reads as the user's own configuration and then acts on (the
    home, a deployment file, a hooks file or folder, a plugin or skill folder, a sandbox program):
    a sandbox keeps each of them read-only, so that nothing a confined command can write is ever
    trusted later.
    """
    return frozenset(_TRUSTED)


def _owner_ok(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def trust_fault(info: os.stat_result, *, above: bool = False, secret: bool = False) -> str | None:
    """The one trust rule on owner and mode, judged on a status (``os.fstat`` of what was opened).

    ``"owner"`` when the path is owned by neither this user (the effective uid) nor root; ``"mode"``
    when group or others may write it (for a folder ``above`` a trusted path, unless it has the
    sticky bit, as ``/tmp`` has), or, for a ``secret`` (a private key), may read or run it at all;
    None when it is trusted. Every owner-and-mode check of dsh asks this (the trusted walk below,
    hook env files, run-time caches, ``dsh sessions verify``, bash-ssh's ``identity_file``), so
    they cannot disagree; each says in its own words what the fault means where it is.
    """
    if not _owner_ok(info.st_uid):
        return "owner"
    shut = stat.S_IRWXG | stat.S_IRWXO if secret else stat.S_IWGRP | stat.S_IWOTH
    if info.st_mode & shut and not (above and info.st_mode & stat.S_ISVTX):
        return "mode"
    return None


def _join(folder: str, name: str) -> str:
    return folder.rstrip("/") + "/" + name


def _walk(path: str | os.PathLike[str], what: str, final: str, create: bool, follow: bool = True) -> int:
    """Open ``path`` by a trusted walk from ``/`` and return the descriptor of its last component.

    ``final`` is what the last component must be: a folder (``"dir"``, an ``O_PATH`` descriptor where
    the system has it), a regular file opened for reading (``"file"``, blocking), or either
    (``"any"``). With ``create`` missing folders are made 0700 on the way; without ``follow`` a
    symbolic link as the last component is refused (``ELOOP``) even when it is yours.
    """
    given = os.path.abspath(os.fspath(path))
    label = f"{what} {given}" if what else given
    pending = [part for part in reversed(given.split("/")) if part]
    where = "/"
    fd = os.open("/", _DIR_FLAGS)
    links = 0
    try:
        _check_folder(os.fstat(fd), where, label, given)
        if not pending:  # the path is `/` itself
            _check_final(os.fstat(fd), label, given)
            fd, opened = -1, fd
            return opened
        while pending:
            name = pending.pop()
            last = not pending
            here = _join(where, name)
            kind = final if last else "dir"
            flags = _DIR_FLAGS if kind == "dir" else _READ_FLAGS if kind == "file" else _ANY_FLAGS
            try:
                child = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                if not (create and kind == "dir"):
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), given) from None
                _make_private(fd, name, label, here)
                pending.append(name)  # opened (and checked) like any existing folder on the next turn
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise type(exc)(exc.errno, exc.strerror, here) from None
                child = -1
            info = os.lstat(name, dir_fd=fd) if child < 0 else os.fstat(child)
            if stat.S_ISLNK(info.st_mode):
                if child >= 0:
                    os.close(child)
                links += 1
                if links > _MAX_LINKS or (last and not follow):
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), given)
                _check_link(info, here, label, given)
                # The link's folder is trusted (checked), so nobody else can re-point it before this read.
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    os.close(fd)
                    fd, where = os.open("/", _DIR_FLAGS), "/"
                pending.extend(part for part in reversed(target.split("/")) if part)
                if not pending:  # a link to `/`
                    pending.append(".")
                continue
            if child < 0:  # not a link and not a folder where one is needed
                if create:  # one sentence naming the role and the path, not a bare errno
                    raise NotADirectoryError(
                        f"cannot create {label}: {here} is not a directory; move it aside or use another path"
                    )
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), here)
            os.close(fd)
            fd, where = child, os.path.normpath(here)
            if last:
                if kind == "file":
                    refuse_irregular(info, given, what)
                _check_final(info, label, given)
                if kind == "file":
                    os.set_blocking(fd, True)
            else:
                _check_folder(info, where, label, given)
        _TRUSTED.update((given, where))
        fd, opened = -1, fd
        return opened
    finally:
        if fd >= 0:
            os.close(fd)


def _make_private(folder_fd: int, name: str, label: str, here: str) -> None:
    try:
        os.mkdir(name, 0o700, dir_fd=folder_fd)
    except FileExistsError:
        return  # made by a concurrent process: checked like any existing folder
    except OSError as exc:
        # One sentence naming the role and the path, not a bare errno.
        raise type(exc)(f"cannot create {label}: {exc.strerror or exc} at {here}") from None
    # mkdir's mode is filtered by the umask (0o777 would leave it unusable); set it exactly. The
    # folder it is in was checked, so the name is still the folder just made.
    os.chmod(name, 0o700, dir_fd=folder_fd)


def _check_link(info: os.stat_result, link: str, label: str, given: str) -> None:
    if _owner_ok(info.st_uid):
        return
    if link == given:
        raise UntrustedPathError(
            given,
            f"refusing {label}: it is a symbolic link owned by uid {info.st_uid}, not by you "
            f"(uid {os.geteuid()}) or root, who can re-point it at any time; remove it (`rm {link}`) "
            "and use a path you own",
        )
    raise UntrustedPathError(
        given,
        f"refusing {label}: the symbolic link {link} on its way is owned by uid {info.st_uid}, not by you "
        f"(uid {os.geteuid()}) or root, who can re-point it at any time; remove it (`rm {link}`) "
        "or use a path without it",
    )


def _check_final(info: os.stat_result, label: str, given: str) -> None:
    fault = trust_fault(info)
    if fault is None:
        return
    private = "700" if stat.S_ISDIR(info.st_mode) else "600"
    if fault == "owner":
        raise UntrustedPathError(
            given,
            f"refusing {label}: it is owned by uid {info.st_uid}, not by you (uid {os.geteuid()}); "
            f"use one you own and run `chmod {private}` on it",
        )
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX:  # /tmp itself: not yours to chmod
        raise UntrustedPathError(
            given,
            f"refusing {label}: it is a shared folder others can add files to (mode {mode:04o}); "
            f"use a folder of your own inside it (`mkdir -m 700 {_join(given, 'mine')}`)",
        )
    raise UntrustedPathError(
        given,
        f"refusing {label}: it is writable by group or others (mode {mode:04o}); run `chmod {private} {given}`",
    )


def _check_folder(info: os.stat_result, folder: str, label: str, given: str) -> None:
    fault = trust_fault(info, above=True)
    if fault == "owner":
        raise UntrustedPathError(
            given,
            f"refusing {label}: the folder {folder} above it is owned by uid {info.st_uid}, not by you "
            "or root; keep it under folders only you (or root) control",
        )
    if fault == "mode":
        raise UntrustedPathError(
            given,
            f"refusing {label}: the folder {folder} above it is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):04o}); run `chmod go-w {folder}` or move it",
        )


def check_trusted(path: str | os.PathLike[str], what: str = "") -> None:
    """Raise :class:`UntrustedPathError` unless ``path`` is owned by this user (or root) and not group/other-writable.

    ``what`` names the path's role in the message (``"DSH_HOME"``, ``"hooks file"``). The folders
    above must be trusted too, and a symbolic link on the way is followed only when it is yours or
    root's. A missing path raises :class:`FileNotFoundError`. Checking, then using the path, is
    safe because nobody else can change any component of a path that passed; reading a file is
    better done with :func:`open_trusted` (one open, checked as opened).
    """
    os.close(_walk(path, what, "any", create=False))


def open_trusted(path: str | os.PathLike[str], what: str = "", *, follow: bool = True) -> int:
    """Open the regular file ``path`` for reading by a trusted walk; the checks are on the descriptor.

    The rule is :func:`check_trusted`'s; a FIFO, device, socket or folder raises
    :class:`~dsh.paths.NotRegularFileError` (the open never blocks). With ``follow=False`` a
    symbolic link as the last component is refused (``ELOOP``). Returns a blocking descriptor.
    """
    return _walk(path, what, "file", create=False, follow=follow)


def read_trusted_text(path: str | os.PathLike[str], what: str = "") -> str:
    """The UTF-8 text of the trusted regular file ``path``, read from the descriptor checked (:func:`open_trusted`)."""
    with os.fdopen(open_trusted(path, what), "r", encoding="utf-8") as handle:
        return handle.read()


def ensure_private_dir(path: str | os.PathLike[str], what: str = "") -> str:
    """Create ``path`` and any missing parents as 0700 directories (whatever the umask); check it; return it absolute.

    Existing directories are not changed; the walk that makes the missing ones checks every
    component as :func:`check_trusted` does, the last as the trusted folder itself.
    (:func:`dsh.paths.ensure_private_dir` is the same, returning a ``Path``.)
    """
    os.close(_walk(path, what, "dir", create=True))
    return os.path.abspath(path)


def create_private_file(path: str | os.PathLike[str]) -> int:
    """Create ``path`` exclusively as a 0600 file and return a descriptor open for writing.

    Never follows a symbolic link and never reuses an existing file (``O_EXCL | O_NOFOLLOW``).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return fd
