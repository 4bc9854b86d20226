"""Deployments: which backend and plugins to load, validated, composed into a running kernel."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dsh.paths import resolve_dsh_home

from ._context import Context
from ._discovery import PERSISTENCE_GROUP, PLUGINS_GROUP, Catalog, EntryPointItem, GroupDiff, import_ref
from ._errors import BootError, DeploymentError, DshError
from ._fiber import Fiber, FiberState
from ._plugin import field_path, plain_error
from ._services import ServiceKey

DSH_HOME: ServiceKey[Path] = ServiceKey("dsh_home")
"""The harness home, resolved once per deployment and routed to every consumer."""

CATALOG: ServiceKey[Catalog] = ServiceKey("catalog")
"""The entry-point catalog of the running deployment."""


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
        raise DeploymentError(f"{source}: {problems}") from None


def load_deployment(path: str | os.PathLike[str]) -> Deployment:
    """Read and validate a YAML deployment file."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise DeploymentError(f"{source}: cannot read deployment file: {exc.strerror or exc}") from None
    import yaml  # only deployment files need it; the default deployment does not

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise DeploymentError(f"{source}: invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if raw is not None and not isinstance(raw, Mapping):
        raise DeploymentError(f"{source}: a deployment must be a mapping, not {type(raw).__name__}")
    return parse_deployment(raw, source)


def resolve_home(deployment: Deployment, env: Mapping[str, str] | None = None, source: str = "<deployment>") -> Path:
    """Resolve the one harness home; fail when two places configure homes that differ."""
    configured: list[tuple[str, str]] = []
    if deployment.dsh_home:
        configured.append(("dsh_home", deployment.dsh_home))
    home_in_persistence = deployment.persistence.config.get("dsh_home")
    if isinstance(home_in_persistence, str) and home_in_persistence.strip():
        configured.append(("persistence.config.dsh_home", home_in_persistence))
    for entry in deployment.plugins:
        value = entry.config.get("dsh_home")
        if isinstance(value, str) and value.strip():
            configured.append((f"entry '{entry.id}' config.dsh_home", value))
    resolved = [(where, resolve_dsh_home(value, env)) for where, value in configured]
    for where, path in resolved[1:]:
        if path != resolved[0][1]:
            raise DeploymentError(
                f"{source}: {resolved[0][0]} resolves to {resolved[0][1]} but {where} resolves to {path}; "
                "configure one harness home"
            )
    return resolved[0][1] if resolved else resolve_dsh_home(None, env)


def load_object(ref: str) -> Any:
    """Import ``module:attr``; raise :class:`DshError` naming the reference on failure."""
    try:
        return import_ref(ref)
    except Exception as exc:
        raise DshError(f"cannot import plugin '{ref}': {type(exc).__name__}: {exc}") from None


class Runtime:
    """A composed deployment: the root context, one fiber per entry, and the catalog."""

    def __init__(self, deployment: Deployment, source: str, home: Path, catalog: Catalog) -> None:
        self.deployment = deployment
        self.source = source
        self.home = home
        self.catalog = catalog
        self.ctx = Context.root("deployment")
        self.entries: dict[str, Fiber] = {}
        self.failures: dict[str, str] = {}
        self.builtins: list[Fiber] = []

    def fibers(self) -> list[Fiber]:
        """Every live fiber of the deployment, depth first from the root."""
        return self.ctx.fiber.walk()

    def problems(self) -> list[str]:
        """One line per essential fiber that failed or still waits for services (these fail boot)."""
        lines = [f"entry '{eid}': {msg}" for eid, msg in self.failures.items()]
        for fiber in [*self.builtins, *self.entries.values()]:
            for f in fiber.walk():
                if not f.essential:
                    continue
                if f.state is FiberState.FAILED:
                    lines.append(f"entry '{f.label}' (plugin '{f.name}') failed: {f.error}")
                elif f.state is FiberState.PENDING:
                    lines.append(
                        f"entry '{f.label}' (plugin '{f.name}') is pending, waiting for service(s): "
                        + ", ".join(f.missing)
                    )
        return lines

    def warnings(self) -> list[str]:
        """One line per failed non-essential fiber (an auto-discovered contributor, say): loud, not fatal."""
        return [
            f"plugin '{f.label}'"
            + (f" (from {f.origin.distribution} {f.origin.version})" if f.origin else "")
            + f" failed: {f.error}"
            for f in self.fibers()
            if not f.essential and f.state is FiberState.FAILED
        ]

    def check(self) -> None:
        """Raise :class:`BootError` listing every failed or pending entry."""
        problems = self.problems()
        if problems:
            raise BootError(f"{self.source}: deployment did not boot: " + "; ".join(problems))

    def refresh(self, *, force: bool = False) -> list[GroupDiff]:
        """Re-read installed distributions and bring fibers in step with them."""
        return self.catalog.refresh(force=force)

    def close(self) -> None:
        """Unload everything, in reverse order of loading."""
        self.ctx.fiber.dispose()

    def _load_entry(self, entry_id: str, group: str, name: str, config: object) -> None:
        try:
            if ":" in name:
                plugin, origin = load_object(name), None
            else:
                origin = self.catalog.find(group, name)
                plugin = origin.load()
        except DshError as exc:
            self.failures[entry_id] = str(exc)
            return
        self.entries[entry_id] = self.ctx.plugin(plugin, config, label=entry_id, origin=origin)

    def _on_diff(self, diff: GroupDiff) -> None:
        by_item: dict[EntryPointItem, str] = {}
        for entry_id, fiber in self.entries.items():
            if fiber.origin is not None:
                by_item[fiber.origin] = entry_id
        removed = {(i.group, i.name): i for i in diff.removed}
        changed = {(i.group, i.name): i for i in diff.changed}
        for item, entry_id in by_item.items():
            key = (item.group, item.name)
            fiber = self.entries[entry_id]
            if key in removed:
                fiber.dispose()
                fiber.error = f"distribution {item.distribution} {item.version} was uninstalled"
            elif key in changed:
                new = changed[key]
                try:
                    fiber.origin = new
                    fiber.reload(new.load())
                except DshError as exc:
                    fiber.dispose()
                    fiber.error = str(exc)


def compose(
    deployment: Deployment,
    *,
    source: str = "<deployment>",
    builtins: Sequence[object] = (),
    env: Mapping[str, str] | None = None,
    catalog: Catalog | None = None,
) -> Runtime:
    """Load a deployment without judging it: see :meth:`Runtime.problems` and :meth:`Runtime.check`.

    ``builtins`` are plugins the caller always wants (the agent's tool registry, say),
    loaded at the root before the persistence backend and the entries.
    """
    home = resolve_home(deployment, env, source)
    runtime = Runtime(deployment, source, home, catalog or Catalog())
    root = runtime.ctx
    root.provide(DSH_HOME, home)
    root.provide(CATALOG, runtime.catalog)
    root.effect(lambda: runtime.catalog.watch(PLUGINS_GROUP, runtime._on_diff), label="watch dsh.plugins")
    root.effect(lambda: runtime.catalog.watch(PERSISTENCE_GROUP, runtime._on_diff), label="watch dsh.persistence")
    for plugin in builtins:
        runtime.builtins.append(root.plugin(plugin))
    persistence = deployment.persistence
    runtime._load_entry("persistence", PERSISTENCE_GROUP, persistence.backend, persistence.config)
    for entry in deployment.plugins:
        if entry.enabled:
            runtime._load_entry(entry.id, PLUGINS_GROUP, entry.name, entry.config)
    return runtime


def boot(
    deployment: Deployment,
    *,
    source: str = "<deployment>",
    builtins: Sequence[object] = (),
    env: Mapping[str, str] | None = None,
) -> Runtime:
    """Compose and check; on a failed boot, unload what loaded and raise :class:`BootError`."""
    runtime = compose(deployment, source=source, builtins=builtins, env=env)
    try:
        runtime.check()
    except BootError:
        runtime.close()
        raise
    return runtime
