"""The one trust rule for what dsh keeps in its home, after OpenSSH's ``StrictModes``.

A directory or file dsh trusts (the home, ``run/``, ``hooks/``, a hook or deployment file) must be
owned by the current user (or by root, as OpenSSH allows) and must not be writable by group or
others: anyone else who can write there could plant a socket, a hook or a plugin reference that
then runs with the user's credentials. What dsh creates it creates private (directories 0700,
files 0600) whatever the process umask.

The folders above a trusted path count too (OpenSSH walks them as well): each must be owned by the
user or root, and one writable by group or others must have the sticky bit (as ``/tmp`` has), or
someone else could rename the trusted path away and put their own in its place between the check
and the use. The walk follows the real path, so a symbolic link into such a folder is refused.
"""

from __future__ import annotations

import os
import stat

from ._errors import UntrustedPathError

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib only where a Path is returned: the served `dsh exec` checks its home without it
    from pathlib import Path

__all__ = ["check_trusted", "create_private_file", "ensure_private_dir"]


def _owner_ok(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def check_trusted(path: str | os.PathLike[str], what: str = "") -> None:
    """Raise :class:`UntrustedPathError` unless ``path`` is owned by this user (or root) and not group/other-writable.

    ``what`` names the path's role in the message (``"DSH_HOME"``, ``"hooks file"``). Symbolic links
    are followed: what counts is the directory or file they lead to. A missing path is not checked
    (raises :class:`FileNotFoundError`).
    """
    info = os.stat(path)
    label = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    private = "700" if stat.S_ISDIR(info.st_mode) else "600"
    if not _owner_ok(info.st_uid):
        raise UntrustedPathError(
            path,
            f"refusing {label}: it is owned by uid {info.st_uid}, not by you (uid {os.geteuid()}); "
            f"use one you own and run `chmod {private}` on it",
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedPathError(
            path,
            f"refusing {label}: it is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"run `chmod {private} {os.fspath(path)}`",
        )
    for folder in _folders_above(os.path.realpath(path)):
        above = os.stat(folder)
        if not _owner_ok(above.st_uid):
            raise UntrustedPathError(
                path,
                f"refusing {label}: the folder {folder} above it is owned by uid {above.st_uid}, not by you "
                "or root; keep it under folders only you (or root) control",
            )
        if above.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not above.st_mode & stat.S_ISVTX:
            raise UntrustedPathError(
                path,
                f"refusing {label}: the folder {folder} above it is writable by group or others "
                f"(mode {stat.S_IMODE(above.st_mode):04o}); run `chmod go-w {folder}` or move it",
            )


def _folders_above(real: str) -> list[str]:
    """Every folder above the absolute path ``real``, nearest first, up to ``/``."""
    folders = []
    folder = real
    while (parent := os.path.dirname(folder)) != folder:
        folders.append(parent)
        folder = parent
    return folders


def ensure_private_dir(path: str | os.PathLike[str], what: str = "") -> Path:
    """Create ``path`` and any missing parents as 0700 directories (whatever the umask); check it.

    Existing directories are not changed; the last one is then checked with :func:`check_trusted`.
    """
    import pathlib

    target = pathlib.Path(os.path.abspath(path))
    missing: list[Path] = []
    probe = target
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue  # made by a concurrent process: checked below like any existing directory
        except OSError as exc:
            # One sentence naming the role and the path, not a bare errno.
            label = f"{what} {target}" if what else str(target)
            raise type(exc)(f"cannot create {label}: {exc.strerror or exc} at {directory}") from None
        # mkdir's mode is filtered by the umask (0o777 would leave it unusable); set it exactly.
        os.chmod(directory, 0o700)
    check_trusted(target, what)
    return target


def create_private_file(path: str | os.PathLike[str]) -> int:
    """Create ``path`` exclusively as a 0600 file and return a descriptor open for writing.

    Never follows a symbolic link and never reuses an existing file (``O_EXCL | O_NOFOLLOW``).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return fd
