"""The validated-form cache: deployment files and plugin configs as pydantic last validated them.

A cold command with a deployment file would otherwise import yaml and pydantic and build their
schemas only to reach the answer it reached last time: about as much as everything else a cold
``dsh exec`` does. ``<home>/run/validated.cache`` keeps, as JSON:

- each deployment file's **exact text** beside the validated :class:`Deployment` it gave, so a
  hit is a string comparison, never a checksum that could collide; any edit misses;
- each plugin config (a NamedTuple or stdlib-dataclass ``Config`` only) under its plugin's
  reference, the ``Config`` class's fields and the raw mapping, beside the validated fields. A hit
  rebuilds the config with ``Config(**fields)``, so a checked NamedTuple's ``__new__`` (a
  dataclass's ``__post_init__``) still runs; a field that was a tuple is rebuilt as one, and a
  field the file left out that holds its default object is not stored, so it is rebuilt as that
  very object (a mapping field's read-only ``EMPTY_MAPPING``, which JSON would bring back as a
  mutable ``{}``).

Both sections are kept per environment, under the discovery cache's key (the interpreter and the
installed distributions): an install, uninstall or upgrade of any distribution, pydantic included,
starts a new environment's sections. The file holds the newest eight environments (the discovery
cache's ``KEEP``), so two virtual environments sharing one home each keep their forms instead of
discarding the other's on every command.

A form is stored only when it rebuilds to exactly what pydantic produced, the same values of the
same types, so a config that JSON cannot carry exactly (nested records, tuples inside lists, bytes)
is validated every time.

The file is trusted as the discovery cache is (``_discovery_cache``): read only when it is a
regular file owned by this user and private, never through a link, and parsed whole; anything else
is ignored and rewritten. Failing to read or write it is never fatal, only slower.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from ._deployment import Deployment, LoopLimits, ModelChoice, PersistenceChoice, PluginEntry
from ._discovery_cache import KEEP, MAX_CACHE_BYTES, read_private, write_private

VALIDATED_CACHE = "validated.cache"
"""The cache's name in ``<home>/run``."""

_FORMAT = "dsh validated cache 4"
"""Moves whenever what validation accepts changes, so no form validated under older rules is served:
4: a number field refuses a boolean, and a field given in the file is stored even when it equals
its default; 3: one section per environment, newest first (2 held one, so a second environment
sharing the home discarded the first's forms on every command)."""
_MAX_ENTRIES = 64
"""Deployments and configs kept each; the oldest go first (a home shared by many files stays small)."""


def _deployment_form(deployment: Deployment) -> dict[str, Any]:
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


def _deployment_from(data: dict[str, Any]) -> Deployment:
    plugins, model = data["plugins"], data["model"]
    return Deployment(
        dsh_home=data["dsh_home"],
        persistence=PersistenceChoice(**data["persistence"]),
        plugins=None if plugins is None else tuple(PluginEntry(**entry) for entry in plugins),
        model=None if model is None else ModelChoice(**model),
        refresh_per_turn=data["refresh_per_turn"],
        loop=LoopLimits(**data["loop"]),  # a form cached before the field existed: KeyError, validated afresh
    )


def _record_fields(cls: type[Any]) -> list[tuple[str, str]] | None:
    """Each init field of the NamedTuple or dataclass ``cls`` with its annotation; None for another class."""
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        hints: dict[str, Any] = {}
        for base in reversed(cls.__mro__):  # a checked record's fields are annotated on its base
            hints.update(getattr(base, "__annotations__", {}))
        return [(name, str(hints.get(name))) for name in cls._fields]
    if dataclasses.is_dataclass(cls):
        return [(f.name, str(f.type)) for f in dataclasses.fields(cls) if f.init]
    return None


def _defaults(cls: type[Any]) -> dict[str, Any]:
    """The default object of each field of the NamedTuple or dataclass ``cls`` that has one (not a factory's)."""
    if issubclass(cls, tuple):
        return dict(getattr(cls, "_field_defaults", {}))
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


class ValidatedCache:
    """One process's view of ``<home>/run/validated.cache``; :meth:`save` writes what it learnt."""

    def __init__(self, path: str | None, key: str) -> None:
        self._path = path
        self._key = key
        self._changed = False
        data: Any = None
        text = None if path is None else read_private(path)
        if text is not None:
            try:
                data = json.loads(text)
            except (ValueError, RecursionError):  # damaged, or nested past what the parser recurses
                data = None
        environments = data.get("environments") if isinstance(data, dict) and data.get("format") == _FORMAT else None
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

    def deployment(self, source: str, text: str, validate: Callable[[], Deployment]) -> Deployment:
        """The deployment ``text`` (read from ``source``) validates to, from the cache when it is there."""
        cached = self._deployments.get(source)
        if isinstance(cached, dict) and cached.get("text") == text:
            try:
                return _deployment_from(cached["deployment"])
            except Exception:
                pass  # a form this code cannot rebuild (stale, doctored: any error): validate afresh, then overwrite it
        deployment = validate()
        form = _deployment_form(deployment)
        try:
            exact = _deployment_from(json.loads(json.dumps(form))) == deployment
        except (TypeError, ValueError):  # a value JSON cannot hold (a YAML date): validated every time
            exact = False
        if exact:
            self._deployments.pop(source, None)
            self._deployments[source] = {"text": text, "deployment": form}
            self._changed = True
        return deployment

    def config(self, ref: str, cls: type[Any], raw: object, validate: Callable[[], Any]) -> Any:
        """``raw`` validated into the NamedTuple or dataclass ``cls`` (for plugin ``ref``), cached when exact."""
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
            form = {
                "fields": given,
                "tuples": [name for name, v in given.items() if type(v) is tuple],
            }
            form = json.loads(json.dumps(form))
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
        """Write the cache when this process added to it (atomically; a failure only costs speed)."""
        if self._path is None or not self._changed:
            return
        forms = {
            "deployments": dict(list(self._deployments.items())[-_MAX_ENTRIES:]),
            "configs": dict(list(self._configs.items())[-_MAX_ENTRIES:]),
        }
        mine: dict[str, Any] = {"key": self._key, **forms}
        environments = [mine, *self._others[: KEEP - 1]]
        text = json.dumps({"format": _FORMAT, "environments": environments})
        # Never write what read_private would refuse: the other environments' sections go first
        # (oldest first), then this one's oldest forms, until the file fits.
        while len(text.encode()) > MAX_CACHE_BYTES:
            if len(environments) > 1:
                environments.pop()
            else:
                for kind, held in forms.items():
                    newest = list(held.items())
                    mine[kind] = forms[kind] = dict(newest[len(newest) // 2 :]) if len(newest) > 1 else {}
            text = json.dumps({"format": _FORMAT, "environments": environments})
        write_private(self._path, text, ".validated")
        self._changed = False
