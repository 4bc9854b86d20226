"""Deployment files: which backend and plugins to load, validated, and the one harness home."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dsh.core import field_path, plain_error
from dsh.paths import resolve_dsh_home

from ._errors import DeploymentError


class PluginEntry(BaseModel):
    """One plugin of a deployment: ``name`` is a ``dsh.plugins`` entry point or ``module:attr``.

    ``name`` defaults to ``id``. ``enabled: false`` removes the entry (how a deployment file
    removes one of the default plugins it is layered on).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    name: str = Field(default="", validate_default=False)
    config: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True

    @model_validator(mode="after")
    def _name_defaults_to_id(self) -> PluginEntry:
        if not self.name.strip():
            self.name = self.id
        return self


class PersistenceChoice(BaseModel):
    """The session persistence backend: a name in the ``dsh.persistence`` group and its config."""

    model_config = ConfigDict(extra="forbid")

    backend: str = Field(default="jsonl", min_length=1)
    config: dict[str, Any] = Field(default_factory=dict)


class Deployment(BaseModel):
    """A composed harness: home, persistence backend and plugins (YAML or Python)."""

    model_config = ConfigDict(extra="forbid")

    dsh_home: str | None = None
    persistence: PersistenceChoice = Field(default_factory=PersistenceChoice)
    plugins: list[PluginEntry] = Field(default_factory=list)
    refresh_per_turn: bool = True
    """Re-read installed distributions before each turn (cheap when nothing changed)."""

    @field_validator("plugins")
    @classmethod
    def _unique_ids(cls, entries: list[PluginEntry]) -> list[PluginEntry]:
        seen: set[str] = set()
        for entry in entries:
            if entry.id in seen:
                raise ValueError(f"entry id '{entry.id}' appears twice")
            seen.add(entry.id)
        return entries

    @model_validator(mode="after")
    def _no_blank_home(self) -> Deployment:
        if self.dsh_home is not None and not self.dsh_home.strip():
            self.dsh_home = None
        return self


def _describe_loc(raw: object, loc: Sequence[int | str]) -> str:
    if len(loc) >= 2 and loc[0] == "plugins" and isinstance(loc[1], int):
        entries = raw.get("plugins") if isinstance(raw, Mapping) else None
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else None
        entry_id = entry.get("id") if isinstance(entry, Mapping) else None
        where = f"entry '{entry_id}' (plugins[{loc[1]}])" if entry_id else f"plugins[{loc[1]}]"
        rest = field_path(loc[2:])
        return f"{where}, field '{rest}'" if rest else where
    return f"field '{field_path(loc) or '<root>'}'"


def parse_deployment(raw: object, source: str = "<deployment>") -> Deployment:
    """Validate a deployment structure; errors name ``source``, the entry id and the field."""
    try:
        return Deployment.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        problems = "; ".join(f"{_describe_loc(raw, e['loc'])} {plain_error(e)}" for e in exc.errors())
        raise DeploymentError(f"{source}: {problems}", source=source) from None


def load_deployment(path: str | os.PathLike[str]) -> Deployment:
    """Read and validate a YAML deployment file."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise DeploymentError(f"{source}: cannot read deployment file: {exc.strerror or exc}", source=source) from None
    import yaml  # only deployment files need it; the default deployment does not

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise DeploymentError(f"{source}: invalid YAML{where}: {getattr(exc, 'problem', exc)}", source=source) from None
    if raw is not None and not isinstance(raw, Mapping):
        raise DeploymentError(f"{source}: a deployment must be a mapping, not {type(raw).__name__}", source=source)
    return parse_deployment(raw, source)


def resolve_home(deployment: Deployment, env: Mapping[str, str] | None = None) -> Path:
    """The one harness home of a deployment: its ``dsh_home``, else ``$DSH_HOME``, else ``~/.dsh``.

    Plugins read it from the ``dsh_home`` service; one that also takes a ``dsh_home`` setting
    checks that it agrees (:func:`dsh.core.plugin_home`).
    """
    return resolve_dsh_home(deployment.dsh_home, env)
