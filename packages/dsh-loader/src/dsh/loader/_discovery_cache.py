"""The on-disk discovery cache: what the last scan found, keyed by the installed distributions.

A cold command would otherwise import :mod:`importlib.metadata` (with ``email`` and ``zipfile``)
and parse every distribution only to learn what it learnt last time. The key is the interpreter,
``sys.path`` and the fingerprint of every distribution metadata entry on it (the one
:class:`~dsh.loader.Catalog.refresh` compares), computed with ``os.scandir``/``stat`` alone: any
install, uninstall or reinstall moves it, and the next command rescans.

The file is never trusted further than dsh-paths' one rule: it is read only when it is a regular
file (never through a symbolic link) that passes that rule (owned by this user or root, writable by
no one else, under folders that pass it too), and it must parse completely, up to its end line.
Anything else (damaged, foreign, unreadable) is ignored and rewritten; failing to write it is
never fatal. It is written whole under a random temporary name and renamed into place, so a
reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys

from dsh.paths import open_trusted

_MAGIC = "dsh discovery cache 3"
_KEY = "key "
_END = "end"
KEEP = 8
"""Keys kept in one file, newest first: interpreters, virtual environments or ``sys.path``
variants sharing a home do not evict each other (the validated-form cache keeps as many)."""

Row = tuple[str, ...]
"""``("I" or "L", group, name, value, distribution, version, installed)``: an item, or one left out."""


@functools.cache
def _interpreter(executable: str | None) -> str | None:
    """The real path of ``executable``; an embedded interpreter's ``None`` or ``''`` as it is (``''``
    would resolve to the working directory)."""
    return os.path.realpath(executable) if executable else executable


def cache_key(fingerprint: tuple[tuple[str, object], ...]) -> str:
    """One line naming the interpreter and each ``sys.path`` entry that holds distribution metadata
    (with every metadata entry in it), in ``sys.path``'s order.

    An entry with none (a missing folder, an empty one, a source folder) finds no entry point, so it
    is left out: ``dsh`` (its script's folder first on ``sys.path``) and ``python -m dsh.cli`` (the
    working directory first), from any folder, share one key. An entry that gains metadata enters
    the key, and the next command rescans. The interpreter is named by its real path: a virtual
    environment's ``python`` and ``python3`` links (the ``dsh`` script's shebang is either, as the
    installer wrote it) are one interpreter, so one key.
    """
    stable = [
        (entry, tuple(sorted(seen)) if isinstance(seen, frozenset) else seen) for entry, seen in fingerprint if seen
    ]
    text = repr((_interpreter(sys.executable), sys.version, sys.implementation.cache_tag, stable))
    return text.replace("\n", "\\n")


MAX_CACHE_BYTES = 16 << 20
"""The most a run-time cache file may hold (16 MiB; real ones hold kilobytes): a larger one is not
read, so a bloated or planted file costs one miss, never seconds and gigabytes on every command."""


def read_private(path: str) -> str | None:
    """The text of ``path`` when it is a regular file (never a link) that passes the one trust rule
    (:func:`dsh.paths.open_trusted`), of at most :data:`MAX_CACHE_BYTES`; else None.

    How every run-time cache in ``<home>/run`` is read: a file someone else could have written is
    never believed, only replaced.
    """
    try:
        # One trusted walk to the descriptor checked below, never through a link; a FIFO planted
        # here must not hang every verb: refused, then rewritten.
        fd = open_trusted(path, follow=False)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if info.st_size > MAX_CACHE_BYTES:  # owner and mode: the one rule, judged by open_trusted
            return None
        with os.fdopen(fd, "r", encoding="utf-8", closefd=False) as handle:
            return handle.read()
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def write_private(path: str, text: str, prefix: str) -> None:
    """Replace ``path`` with ``text`` atomically (0600, under a random temporary name); never raises."""
    folder = os.path.dirname(path)
    temp = os.path.join(folder, f"{prefix}-{os.urandom(8).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temp, flags, 0o600)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(text)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _read_trusted(path: str) -> list[str] | None:
    """The file's lines when it is ours, private, not a link and complete; else None."""
    text = read_private(path)
    if text is None:
        return None
    lines = text.split("\n")
    if len(lines) < 3 or lines[0] != _MAGIC or lines[-2:] != [_END, ""]:
        return None
    return lines[1:-2]


def _sections(lines: list[str]) -> dict[str, list[Row]] | None:
    out: dict[str, list[Row]] = {}
    rows: list[Row] | None = None
    for line in lines:
        if line.startswith(_KEY):
            rows = out[line[len(_KEY) :]] = []
            continue
        row = tuple(line.split("\t"))
        if rows is None or row[0] not in ("I", "L") or len(row) != 7 or not row[6].isdigit():
            return None
        rows.append(row)
    return out


def read_cache(path: str, key: str) -> list[Row] | None:
    """The rows cached under ``key``, or None when the file is absent, stale, foreign or damaged."""
    lines = _read_trusted(path)
    sections = None if lines is None else _sections(lines)
    return None if sections is None else sections.get(key)


def write_cache(path: str, key: str, rows: list[Row]) -> None:
    """Put ``rows`` under ``key`` first, keeping the newest other keys; skip what no line can hold plainly."""
    if any("\t" in part or "\n" in part for row in rows for part in row):
        return  # an entry point no file line can hold unambiguously: scan each time instead
    lines = _read_trusted(path)
    older = (None if lines is None else _sections(lines)) or {}
    older.pop(key, None)
    kept = [(key, rows), *list(older.items())[: KEEP - 1]]
    body = [line for k, section in kept for line in (_KEY + k, *("\t".join(row) for row in section))]
    text = "\n".join([_MAGIC, *body, _END, ""])
    write_private(path, text, ".discovery")
