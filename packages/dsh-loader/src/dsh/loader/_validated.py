"""The validated-form cache: deployment files and plugin configs as pydantic last validated them.

A cold command with a deployment file would otherwise import yaml and pydantic and build their
schemas only to reach the answer it reached last time: about as much as everything else a cold
``dsh exec`` does. ``<home>/run/validated.cache`` keeps, as JSON:

- each deployment file's **exact text** beside the validated :class:`Deployment` it gave, so a
  hit is a string comparison, never a checksum that could collide; any edit misses;
- each plugin config (a stdlib-dataclass ``Config`` only) under its plugin's reference, the
  ``Config`` class's fields and the raw mapping, beside the validated fields. A hit rebuilds the
  config with ``Config(**fields)``, so its ``__post_init__`` checks still run.

Both sections are keyed by this module's format and by the installed distributions (the discovery
cache's key): an install, uninstall or upgrade of any distribution, pydantic included, drops them.
A form is stored only when it rebuilds equal to what pydantic produced, so a config that JSON
cannot carry exactly (nested dataclasses, tuples, bytes) is validated every time.

The file is trusted as the discovery cache is (``_discovery_cache``): read only when it is a
regular file owned by this user and private, never through a link, and parsed whole; anything else
is ignored and rewritten. Failing to read or write it is never fatal, only slower.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import asdict, fields, is_dataclass
from typing import Any

from ._deployment import Deployment, PersistenceChoice, PluginEntry
from ._discovery_cache import read_private, write_private

VALIDATED_CACHE = "validated.cache"
"""The cache's name in ``<home>/run``."""

_FORMAT = "dsh validated cache 1"
_MAX_ENTRIES = 64
"""Deployments and configs kept each; the oldest go first (a home shared by many files stays small)."""


def _deployment_from(data: dict[str, Any]) -> Deployment:
    plugins = data["plugins"]
    return Deployment(
        dsh_home=data["dsh_home"],
        persistence=PersistenceChoice(**data["persistence"]),
        plugins=None if plugins is None else [PluginEntry(**entry) for entry in plugins],
        refresh_per_turn=data["refresh_per_turn"],
    )


def _shape(cls: type[Any]) -> str:
    """The ``Config`` class as far as a cached form depends on it: where it lives and its fields."""
    return repr((cls.__module__, cls.__qualname__, [(f.name, str(f.type)) for f in fields(cls) if f.init]))


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
            except ValueError:
                data = None
        valid = isinstance(data, dict) and data.get("format") == _FORMAT and data.get("key") == key
        self._deployments: dict[str, Any] = data["deployments"] if valid else {}
        self._configs: dict[str, Any] = data["configs"] if valid else {}

    def deployment(self, source: str, text: str, validate: Callable[[], Deployment]) -> Deployment:
        """The deployment ``text`` (read from ``source``) validates to, from the cache when it is there."""
        cached = self._deployments.get(source)
        if isinstance(cached, dict) and cached.get("text") == text:
            try:
                return _deployment_from(cached["deployment"])
            except (KeyError, TypeError, ValueError):
                pass  # a form this code cannot rebuild: validate afresh, then overwrite it
        deployment = validate()
        form = asdict(deployment)
        if _deployment_from(json.loads(json.dumps(form))) == deployment:
            self._deployments.pop(source, None)
            self._deployments[source] = {"text": text, "deployment": form}
            self._changed = True
        return deployment

    def config(self, ref: str, cls: type[Any], raw: object, validate: Callable[[], Any]) -> Any:
        """``raw`` validated into the dataclass ``cls`` (the config of plugin ``ref``), cached when exact."""
        if not (isinstance(cls, type) and is_dataclass(cls)) or not isinstance(raw, dict):
            return validate()
        try:
            key = json.dumps([ref, _shape(cls), raw], sort_keys=True)
        except (TypeError, ValueError):
            return validate()
        cached = self._configs.get(key)
        if isinstance(cached, dict):
            try:
                return cls(**cached)
            except Exception:
                pass
        value = validate()
        try:
            form = {f.name: getattr(value, f.name) for f in fields(cls) if f.init}
            exact = cls(**json.loads(json.dumps(form))) == value
        except Exception:
            exact = False
        if exact and not any(dataclasses.is_dataclass(v) for v in form.values()):
            self._configs.pop(key, None)
            self._configs[key] = form
            self._changed = True
        return value

    def save(self) -> None:
        """Write the cache when this process added to it (atomically; a failure only costs speed)."""
        if self._path is None or not self._changed:
            return
        keep = {
            "deployments": dict(list(self._deployments.items())[-_MAX_ENTRIES:]),
            "configs": dict(list(self._configs.items())[-_MAX_ENTRIES:]),
        }
        write_private(self._path, json.dumps({"format": _FORMAT, "key": self._key, **keep}), ".validated")
        self._changed = False
