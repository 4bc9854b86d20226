"""Composition: a deployment loaded into a running kernel, checked, refreshed and closed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from dsh.core import (
    Context,
    DshError,
    Fiber,
    FiberState,
    PluginError,
    ServiceKey,
    describe,
    plugin_config,
)
from dsh.session import DSH_HOME
from dsh.session.persistence import PERSISTENCE_GROUP

from ._contain import contained, containment
from ._deployment import Deployment, LoopLimits, ModelChoice, ValidationMemo, resolve_home
from ._discovery import PLUGINS_GROUP, Catalog, EntryPointItem, GroupDiff, import_ref
from ._errors import BootError, DiscoveryError

CATALOG: ServiceKey[Catalog] = ServiceKey("catalog")
"""The entry-point catalog of the running deployment."""

MODELS_GROUP = "dsh.models"
"""Entry points naming model provider plugins; a deployment's ``model.provider`` (or ``dsh run --model``)
picks one. The loader names the group because it loads the deployment's choice; the ``Model``
protocol a provider produces is dsh-agent's."""

MODEL_ENTRY = "model"
"""The entry id a deployment's model provider loads under (what boot reports and ``dsh plugins`` show)."""

TURN_REFRESH: ServiceKey[Callable[[], object]] = ServiceKey("turn_refresh")
"""What a host calls at each turn start: the catalog's ``refresh``, provided only when the
deployment's ``refresh_per_turn`` is true (the default), so ``false`` really turns it off."""


LOOP_LIMITS: ServiceKey[LoopLimits] = ServiceKey("loop_limits")
"""The deployment's agent loop limits (:class:`~dsh.loader.LoopLimits`), provided at the root by :func:`compose`."""


def validate_config(name: str, config_cls: type[Any], raw: object) -> Any:
    """Validate a plugin's raw config against its ``Config`` (a pydantic model or a stdlib dataclass).

    The kernel's ``validate`` seam as dsh fills it: pydantic, imported only now (see
    :func:`dsh.loader.validation.validate_config`); raises :class:`~dsh.core.PluginError` naming the field.
    """
    from .validation import validate_config as validate

    return validate(name, config_cls, raw)


def root(name: str = "root") -> Context:
    """A new kernel as dsh runs plugins: configs validated by :func:`validate_config`, plugin code
    run through :func:`contained` (a plugin's ``SystemExit`` fails its fiber, a real Ctrl-C still stops)."""
    return Context.root(name, validate=validate_config, guard=contained)


def load_object(ref: str) -> Any:
    """Import ``module:attr``; raise :class:`DiscoveryError` naming the reference on failure."""
    try:
        return contained(lambda: import_ref(ref))
    except Exception as exc:
        raise DiscoveryError(f"cannot import plugin '{ref}': {describe(exc)}", group="module:attr", name=ref) from None


class Runtime:
    """A composed deployment: the root context, one fiber per entry, and the catalog.

    Use it as a context manager (``with boot(...) as runtime:``) so it is closed on the way out.
    """

    def __init__(self, deployment: Deployment, source: str, home: Path, catalog: Catalog) -> None:
        self.deployment = deployment
        self.source = source
        self.home = home
        self.catalog = catalog
        self.ctx = root("deployment")
        self.entries: dict[str, Fiber] = {}
        self.failures: dict[str, str] = {}
        self._raw_configs: dict[str, object] = {}
        self.builtins: list[Fiber] = []

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def fibers(self) -> list[Fiber]:
        """Every live fiber of the deployment, depth first from the root."""
        return list(self.ctx.fiber.walk())

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
                        + ", ".join(_with_suggestion(f, name) for name in f.missing)
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
            raise BootError(
                f"{self.source}: deployment did not boot: " + "; ".join(problems), source=self.source, problems=problems
            )

    def refresh(self, *, force: bool = False) -> list[GroupDiff]:
        """Re-read installed distributions and bring fibers in step with them."""
        if not force and not self.catalog.moved():
            # Nothing installed or removed: no plugin code runs, so no signal watch is armed (a turn of
            # `dsh serve` asks this at every start; arming and disarming cost 26 `sigaction` calls).
            return []
        with containment():  # one signal watch for every plugin the diffs load or unload
            return self.catalog.refresh(force=force)

    def close(self) -> None:
        """Unload everything, in reverse order of loading."""
        with containment():  # one signal watch for every disposer
            self.ctx.fiber.dispose()

    def load_model(self, choice: ModelChoice | None = None) -> Fiber:
        """Load the model provider (``choice``, else the deployment's ``model``) as entry ``model``.

        A provider is loaded only when a command drives a model, never at composition: the other
        verbs import no provider. Raises :class:`BootError` naming the provider when it is not
        installed, fails to import or fails its config; a second call returns the loaded fiber.
        """
        loaded = self.entries.get(MODEL_ENTRY)
        if loaded is not None:
            return loaded
        choice = choice or self.deployment.model
        if choice is None:
            raise BootError(
                f"{self.source}: no model provider is chosen; set `model: {{provider: NAME}}` in the deployment "
                f"or pass --model NAME (installed: {', '.join(self.catalog.names(MODELS_GROUP)) or 'none'})",
                source=self.source,
                problems=["no model provider"],
            )
        with containment():
            self._load_entry(MODEL_ENTRY, MODELS_GROUP, choice.provider, choice.config)
        fiber = self.entries.get(MODEL_ENTRY)
        problem = self.failures.pop(MODEL_ENTRY, None)
        if fiber is not None and fiber.state is FiberState.FAILED:
            problem = f"model provider '{choice.provider}' failed: {fiber.error}"
        elif fiber is not None and fiber.state is FiberState.PENDING:
            problem = f"model provider '{choice.provider}' waits for service(s): {', '.join(fiber.missing)}"
        if problem is not None or fiber is None:
            self.entries.pop(MODEL_ENTRY, None)
            if fiber is not None:
                fiber.dispose()
            problem = problem or f"model provider '{choice.provider}' did not load"
            raise BootError(f"{self.source}: {problem}", source=self.source, problems=[problem])
        return fiber

    def _load_entry(
        self, entry_id: str, group: str, name: str, config: object, validated: ValidationMemo | None = None
    ) -> None:
        try:
            if ":" in name:
                plugin, origin = load_object(name), None
            else:
                origin = self.catalog.find(group, name)
                plugin = origin.load()
        except DshError as exc:
            self.failures[entry_id] = str(exc)
            return
        self._raw_configs[entry_id] = config  # a reload validates the entry's own words again, never a form
        config_cls = getattr(plugin, "Config", None)
        if validated is not None and config and isinstance(config, Mapping) and isinstance(config_cls, type):
            ref = name if origin is None else f"{origin.group}:{origin.name}:{origin.value}"
            # An invalid config is left to the kernel, which fails the entry's fiber with the same message.
            with contextlib.suppress(PluginError):
                config = validated.config(
                    ref, config_cls, config, lambda: plugin_config(plugin, config, validate_config)
                )
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
                    fiber.reload(new.load(), self._raw_configs.get(entry_id))
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
    validated: ValidationMemo | None = None,
) -> Runtime:
    """Load a deployment without judging it: see :meth:`Runtime.problems` and :meth:`Runtime.check`.

    ``builtins`` are plugins the caller always wants (the agent's tool registry, say),
    loaded at the root before the persistence backend and the entries. ``catalog`` is the discovery
    to use (a new :class:`Catalog` by default); ``validated`` may answer plugin configs validated before.
    """
    with containment():  # one signal watch for every plugin's import and apply
        return _compose(deployment, source, builtins, env, catalog, validated)


def _compose(
    deployment: Deployment,
    source: str,
    builtins: Sequence[object],
    env: Mapping[str, str] | None,
    catalog: Catalog | None,
    validated: ValidationMemo | None,
) -> Runtime:
    home = resolve_home(deployment, env)
    runtime = Runtime(deployment, source, home, catalog or Catalog())
    root = runtime.ctx
    root.provide(DSH_HOME, home)
    root.provide(CATALOG, runtime.catalog)
    root.provide(LOOP_LIMITS, deployment.loop)
    if deployment.refresh_per_turn:
        root.provide(TURN_REFRESH, runtime.refresh)
    root.effect(lambda: runtime.catalog.watch(PLUGINS_GROUP, runtime._on_diff), label="watch dsh.plugins")
    root.effect(lambda: runtime.catalog.watch(PERSISTENCE_GROUP, runtime._on_diff), label="watch dsh.persistence")
    root.effect(lambda: runtime.catalog.watch(MODELS_GROUP, runtime._on_diff), label="watch dsh.models")
    for plugin in builtins:
        runtime.builtins.append(root.plugin(plugin))
    persistence = deployment.persistence
    runtime._load_entry("persistence", PERSISTENCE_GROUP, persistence.backend, persistence.config, validated)
    for entry in deployment.plugins or ():
        if entry.enabled:
            runtime._load_entry(entry.id, PLUGINS_GROUP, entry.name, entry.config, validated)
    if validated is not None:
        validated.save()
    return runtime


def boot(
    deployment: Deployment,
    *,
    source: str = "<deployment>",
    builtins: Sequence[object] = (),
    env: Mapping[str, str] | None = None,
    catalog: Catalog | None = None,
    validated: ValidationMemo | None = None,
) -> Runtime:
    """Compose and check; on a failed boot, unload what loaded and raise :class:`BootError`."""
    runtime = compose(deployment, source=source, builtins=builtins, env=env, catalog=catalog, validated=validated)
    try:
        runtime.check()
    except BootError:
        runtime.close()
        raise
    return runtime


def _with_suggestion(fiber: Fiber, name: str) -> str:
    """``name``, and the provided service it was likely meant to be (``bash-env`` for ``bash_env``)."""
    import difflib  # only on the way to a boot report

    provided = [n for n in fiber.kernel.services if fiber.kernel.available(n)]
    spelled = {n.replace("-", "_").lower(): n for n in provided}
    match = spelled.get(name.replace("-", "_").lower())
    if match is None:
        close = difflib.get_close_matches(name, provided, n=1, cutoff=0.8)
        match = close[0] if close else None
    return name if match is None else f"{name} (did you mean '{match}'?)"
