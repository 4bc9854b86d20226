"""The ``dsh`` command's start-up memos: installed entry points and validated forms, kept in ``<home>/run``.

dsh-loader discovers plugins with :mod:`importlib.metadata` and validates deployment files and plugin
configs with yaml and pydantic, every time, unless it is handed memos that answer for them
(``dsh.loader.EntryPointMemo``, ``dsh.loader.ValidationMemo``). A cold ``dsh`` command would otherwise
pay for those imports and that work only to learn what the last command learnt (about 70 M
instructions for discovery, 210 M for a deployment file: together more than the rest of a cold
``dsh exec``), so the command hands :class:`CommandMemos` to ``dsh.harness.open_runtime``. They live
here, inside the start-up fence, because they exist only for start-up time.

**The entry-point memo** (``<home>/run/discovery.cache``) keeps, under a key naming the interpreter
(the real path of ``sys.executable``, its version and cache tag) and each ``sys.path`` entry holding
distribution metadata with the name, inode and modification time of each ``*.dist-info``,
``*.egg-info`` and ``*.pth`` entry in it (the loader's fingerprint), the rows the scan found. Any
install, uninstall or reinstall (the same version too: a new inode) moves the key, so the next command
scans again: an uninstalled plugin's entry points are gone on the next command. The 8 newest keys are
kept (``KEEP``), so interpreters and virtual environments sharing a home do not evict each other.

**The validated-form memo** (``<home>/run/validated.cache``, JSON) keeps, per environment (the same key):

- each deployment file's **exact text** beside the validated deployment it gave, so a hit is a string
  comparison, never a checksum that could collide; any edit validates again. The deployment is
  rebuilt through its record classes (handed in: this folder imports nothing of dsh-loader), whose
  checking constructors run on every hit;
- each plugin config (a NamedTuple or stdlib-dataclass ``Config`` only) under its plugin's reference,
  the ``Config`` class's module, name and fields, and the raw mapping, beside the validated fields. A
  hit rebuilds the config with ``Config(**fields)``, so a checked NamedTuple's ``__new__`` (a
  dataclass's ``__post_init__``) still runs; a field that was a tuple is rebuilt as one, and a field
  the file left out that holds its default object is not stored, so it is rebuilt as that very object
  (a mapping field's read-only ``EMPTY_MAPPING``, which JSON would bring back as a mutable ``{}``).

A form is stored only when it rebuilds to exactly what pydantic produced, the same values of the same
types, so a config that JSON cannot carry exactly (nested records, tuples inside lists, bytes) is
validated every time.

**Never trusted, never fatal.** Both files are read only when they pass dsh-paths' one trust rule
(:func:`dsh.paths.open_trusted`: a regular file, never through a link, owned by this user or root and
writable by no one else) and are at most ``MAX_CACHE_BYTES``, and they must parse whole; anything else
(damaged, foreign, a FIFO, too large) is ignored and rewritten. They are written whole under a random
private name (:func:`dsh.paths.create_private_file`) and renamed into place, so a reader sees the old
file or the new one. ``<home>/run`` is made private (0700) and checked first; one that is not trusted
stops the command (its sockets and locks are there too); one that cannot be made leaves the command
without memos, slower and still correct.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys

from dsh.paths import UntrustedPathError, create_private_file, ensure_private_dir, open_trusted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

ENTRY_POINTS_FILE = "discovery.cache"
VALIDATED_FILE = "validated.cache"

KEEP = 8
"""Environments (keys) kept in each file, newest first."""

MAX_CACHE_BYTES = 16 << 20
"""The most a memo file may hold (16 MiB; real ones hold kilobytes): a larger one is not read, so a
bloated or planted file costs one miss, never seconds and gigabytes on every command."""

DEPLOYMENT_RECORDS = ("Deployment", "PersistenceChoice", "PluginEntry", "ModelChoice", "LoopLimits")
"""The dsh-loader record classes :class:`CommandMemos` rebuilds a deployment with, by name."""

_ROWS_MAGIC = "dsh discovery cache 3"
_ROWS_KEY = "key "
_ROWS_END = "end"

_FORMS_FORMAT = "dsh validated cache 4"
"""Moves whenever what validation accepts changes, so no form validated under older rules is served:
4: a number field refuses a boolean, and a field given in the file is stored even when it equals
its default; 3: one section per environment, newest first."""

_MAX_FORMS = 64
"""Deployments and configs kept each per environment; the oldest go first."""


def run_folder(home: Path) -> Path | None:
    """``<home>/run``, made private (0700) and checked; None when ``home`` is no folder or ``run`` cannot be made.

    A ``run`` that exists but is not trusted raises :class:`~dsh.paths.UntrustedPathError` naming it.
    """
    if not home.is_dir():
        return None
    try:
        return ensure_private_dir(home / "run", "dsh run folder")
    except UntrustedPathError:
        raise
    except OSError:
        return None


def read_private(path: str) -> str | None:
    """The text of ``path`` when it is a regular file (never a link) that passes the one trust rule and
    holds at most :data:`MAX_CACHE_BYTES`; else None."""
    try:
        # One trusted walk to the descriptor checked below, never through a link; a FIFO planted
        # here must not hang every command: refused, then rewritten.
        fd = open_trusted(path, follow=False)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size > MAX_CACHE_BYTES:
            return None
        with os.fdopen(fd, "r", encoding="utf-8", closefd=False) as handle:
            return handle.read()
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def write_private(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (0600, under a random temporary name); never raises."""
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}-{os.urandom(8).hex()}.tmp")
    try:
        fd = create_private_file(temp)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


@functools.cache
def _interpreter(executable: str | None) -> str | None:
    """The real path of ``executable``; an embedded interpreter's ``None`` or ``''`` as it is (``''``
    would resolve to the working directory)."""
    return os.path.realpath(executable) if executable else executable


def environment_key(fingerprint: Sequence[tuple[str, object]]) -> str:
    """One line naming the interpreter and each ``sys.path`` entry of the loader's fingerprint that holds
    distribution metadata (with every metadata entry in it), in ``sys.path``'s order.

    An entry with none (a missing folder, an empty one, a source folder) finds no entry point, so it is
    left out: ``dsh`` (its script's folder first on ``sys.path``) and ``python -m dsh.cli`` (the working
    directory first), from any folder, share one key. The interpreter is named by its real path: a
    virtual environment's ``python`` and ``python3`` links are one interpreter, so one key.
    """
    stable = [
        (entry, tuple(sorted(seen)) if isinstance(seen, frozenset) else seen) for entry, seen in fingerprint if seen
    ]
    text = repr((_interpreter(sys.executable), sys.version, sys.implementation.cache_tag, stable))
    return text.replace("\n", "\\n")


class EntryPointFile:
    """The entry-point memo: the loader's scan rows per environment in one line-based file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _sections(self) -> dict[str, list[tuple[str, ...]]] | None:
        """Each key's rows when the file is ours, private, not a link and complete; else None."""
        text = read_private(self.path)
        lines = None if text is None else text.split("\n")
        if lines is None or len(lines) < 3 or lines[0] != _ROWS_MAGIC or lines[-2:] != [_ROWS_END, ""]:
            return None
        out: dict[str, list[tuple[str, ...]]] = {}
        rows: list[tuple[str, ...]] | None = None
        for line in lines[1:-2]:
            if line.startswith(_ROWS_KEY):
                rows = out[line[len(_ROWS_KEY) :]] = []
                continue
            row = tuple(line.split("\t"))
            if rows is None or row[0] not in ("I", "L") or len(row) != 7 or not row[6].isdigit():
                return None
            rows.append(row)
        return out

    def get(self, fingerprint: Sequence[tuple[str, object]]) -> list[tuple[str, ...]] | None:
        """The rows stored under ``fingerprint``'s key, or None when absent, stale, foreign or damaged."""
        sections = self._sections()
        return None if sections is None else sections.get(environment_key(fingerprint))

    def put(self, fingerprint: Sequence[tuple[str, object]], rows: Sequence[tuple[str, ...]]) -> None:
        """Store ``rows`` under ``fingerprint``'s key first, keeping the newest other keys."""
        if any("\t" in part or "\n" in part for row in rows for part in row):
            return  # an entry point no line can hold unambiguously: scan each time instead
        key = environment_key(fingerprint)
        older = self._sections() or {}
        older.pop(key, None)
        kept = [(key, list(rows)), *list(older.items())[: KEEP - 1]]
        body = [line for k, section in kept for line in (_ROWS_KEY + k, *("\t".join(row) for row in section))]
        write_private(self.path, "\n".join([_ROWS_MAGIC, *body, _ROWS_END, ""]))


def _deployment_form(deployment: Any) -> dict[str, Any]:
    plugins = deployment.plugins
    model = deployment.model
    return {
        "dsh_home": deployment.dsh_home,
        "persistence": deployment.persistence._asdict(),
        "plugins": None if plugins is None else [entry._asdict() for entry in plugins],
        "model": None if model is None else model._asdict(),
        "refresh_per_turn": deployment.refresh_per_turn,
        "loop": deployment.loop._asdict(),
    }


def _deployment_from(data: dict[str, Any], records: Mapping[str, Callable[..., Any]]) -> Any:
    plugins, model = data["plugins"], data["model"]
    entry, choice = records["PluginEntry"], records["ModelChoice"]
    return records["Deployment"](
        dsh_home=data["dsh_home"],
        persistence=records["PersistenceChoice"](**data["persistence"]),
        plugins=None if plugins is None else tuple(entry(**fields) for fields in plugins),
        model=None if model is None else choice(**model),
        refresh_per_turn=data["refresh_per_turn"],
        loop=records["LoopLimits"](**data["loop"]),
    )


def _record_fields(cls: type[Any]) -> list[tuple[str, str]] | None:
    """Each init field of the NamedTuple or dataclass ``cls`` with its annotation; None for another class."""
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        hints: dict[str, Any] = {}
        for base in reversed(cls.__mro__):  # a checked record's fields are annotated on its base
            hints.update(getattr(base, "__annotations__", {}))
        return [(name, str(hints.get(name))) for name in cls._fields]
    if hasattr(cls, "__dataclass_fields__"):
        import dataclasses  # loaded already: it made ``cls``

        return [(f.name, str(f.type)) for f in dataclasses.fields(cls) if f.init]
    return None


def _defaults(cls: type[Any]) -> dict[str, Any]:
    """The default object of each field of the NamedTuple or dataclass ``cls`` that has one (not a factory's)."""
    if issubclass(cls, tuple):
        return dict(getattr(cls, "_field_defaults", {}))
    import dataclasses  # loaded already: it made ``cls``

    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def _exact(rebuilt: object, value: object) -> bool:
    """Equal values of the very same types, all the way down (a NamedTuple equals a plain tuple)."""
    if type(rebuilt) is not type(value):
        return False
    if isinstance(value, dict):
        assert isinstance(rebuilt, dict)
        return rebuilt.keys() == value.keys() and all(_exact(rebuilt[k], v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        assert isinstance(rebuilt, (list, tuple))
        return len(rebuilt) == len(value) and all(map(_exact, rebuilt, value))
    return rebuilt == value


def _config_from(cls: type[Any], cached: dict[str, Any]) -> Any:
    fields: dict[str, Any] = dict(cached["fields"])
    for name in cached["tuples"]:
        fields[name] = tuple(fields[name])
    return cls(**fields)


class ValidatedForms:
    """The validation memo: one process's view of the validated-form file; :meth:`save` writes what it learnt.

    ``records`` maps each name of :data:`DEPLOYMENT_RECORDS` to its dsh-loader class. ``path`` None
    remembers nothing between processes.
    """

    def __init__(self, path: str | None, key: str, records: Mapping[str, Callable[..., Any]]) -> None:
        self._path = path
        self._key = key
        self._records = records
        self._changed = False
        data: Any = None
        text = None if path is None else read_private(path)
        if text is not None:
            try:
                data = json.loads(text)
            except (ValueError, RecursionError):  # damaged, or nested past what the parser recurses
                data = None
        ok = isinstance(data, dict) and data.get("format") == _FORMS_FORMAT
        environments = data.get("environments") if ok else None
        if not isinstance(environments, list):
            environments = []
        mine: dict[str, Any] = {}
        self._others: list[Any] = []
        for section in environments:
            if isinstance(section, dict) and section.get("key") == key:
                mine = section
            else:
                self._others.append(section)
        deployments, configs = mine.get("deployments"), mine.get("configs")
        self._deployments: dict[str, Any] = deployments if isinstance(deployments, dict) else {}
        self._configs: dict[str, Any] = configs if isinstance(configs, dict) else {}

    def deployment(self, source: str, text: str, validate: Callable[[], Any]) -> Any:
        """The deployment ``text`` (read from ``source``) validates to, from the memo when it is there."""
        cached = self._deployments.get(source)
        if isinstance(cached, dict) and cached.get("text") == text:
            try:
                return _deployment_from(cached["deployment"], self._records)
            except Exception:
                pass  # a form this code cannot rebuild (stale, doctored: any error): validate afresh, then overwrite it
        deployment = validate()
        form = _deployment_form(deployment)
        try:
            exact = _deployment_from(json.loads(json.dumps(form)), self._records) == deployment
        except (TypeError, ValueError):  # a value JSON cannot hold (a YAML date): validated every time
            exact = False
        if exact:
            self._deployments.pop(source, None)
            self._deployments[source] = {"text": text, "deployment": form}
            self._changed = True
        return deployment

    def config(self, ref: str, cls: type[Any], raw: Mapping[str, Any], validate: Callable[[], Any]) -> Any:
        """``raw`` validated into the NamedTuple or dataclass ``cls`` (for plugin ``ref``), remembered when exact."""
        fields = _record_fields(cls) if isinstance(cls, type) else None
        if fields is None or not isinstance(raw, dict):
            return validate()
        try:
            key = json.dumps([ref, repr((cls.__module__, cls.__qualname__, fields)), raw], sort_keys=True)
        except (TypeError, ValueError):
            return validate()
        cached = self._configs.get(key)
        if isinstance(cached, dict):
            try:
                return _config_from(cls, cached)
            except Exception:
                pass  # a stale or doctored form the class refuses now: validate afresh
        value = validate()
        try:
            values = {name: getattr(value, name) for name, _ in fields}
            defaults = _defaults(cls)
            # A field the file left out and that holds its default object is rebuilt from the default
            # (a mapping field's read-only EMPTY_MAPPING stays that object); one the file gave is stored,
            # even when equal to today's default (a small int is the very default object).
            given = {
                name: v for name, v in values.items() if name in raw or not (name in defaults and v is defaults[name])
            }
            form = json.loads(
                json.dumps({"fields": given, "tuples": [n for n, v in given.items() if type(v) is tuple]})
            )
            rebuilt = _config_from(cls, form)
            exact = type(rebuilt) is type(value) and all(_exact(getattr(rebuilt, n), v) for n, v in values.items())
        except Exception:
            exact = False
        if exact:
            self._configs.pop(key, None)
            self._configs[key] = form
            self._changed = True
        return value

    def save(self) -> None:
        """Write the file when this process added to it (atomically; a failure only costs speed)."""
        if self._path is None or not self._changed:
            return
        forms = {
            "deployments": dict(list(self._deployments.items())[-_MAX_FORMS:]),
            "configs": dict(list(self._configs.items())[-_MAX_FORMS:]),
        }
        mine: dict[str, Any] = {"key": self._key, **forms}
        environments = [mine, *self._others[: KEEP - 1]]
        text = json.dumps({"format": _FORMS_FORMAT, "environments": environments})
        # Never write what read_private would refuse: the other environments' sections go first
        # (oldest first), then this one's oldest forms, until the file fits.
        while len(text.encode()) > MAX_CACHE_BYTES:
            if len(environments) > 1:
                environments.pop()
            else:
                for kind, held in forms.items():
                    newest = list(held.items())
                    mine[kind] = forms[kind] = dict(newest[len(newest) // 2 :]) if len(newest) > 1 else {}
            text = json.dumps({"format": _FORMS_FORMAT, "environments": environments})
        write_private(self._path, text)
        self._changed = False


class CommandMemos:
    """What the ``dsh`` command hands ``dsh.harness.open_runtime`` (its ``StartupMemos``): both memos in
    ``<home>/run``. ``records`` maps each name of :data:`DEPLOYMENT_RECORDS` to its dsh-loader class."""

    def __init__(self, records: Mapping[str, Callable[..., Any]]) -> None:
        missing = [name for name in DEPLOYMENT_RECORDS if name not in records]
        if missing:
            raise ValueError(f"CommandMemos needs the record classes {', '.join(missing)}")
        self._records = records

    def entry_points(self, home: Path) -> EntryPointFile | None:
        """The entry-point memo of ``home``, or None without a private ``run`` folder."""
        run = run_folder(home)
        return None if run is None else EntryPointFile(os.path.join(run, ENTRY_POINTS_FILE))

    def validation(self, home: Path, catalog: Any) -> ValidatedForms:
        """The validation memo of ``home`` for the distributions ``catalog`` reflects (its ``fingerprint``)."""
        run = run_folder(home)
        path = None if run is None else os.path.join(run, VALIDATED_FILE)
        return ValidatedForms(path, environment_key(catalog.fingerprint), self._records)
