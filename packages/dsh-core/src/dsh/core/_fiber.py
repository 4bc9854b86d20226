"""Fibers: the unit of loading and unloading, and the effects they own."""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import DshError, PluginError
from ._plugin import plugin_apply, plugin_inject, plugin_name, validate_config

if TYPE_CHECKING:
    from ._context import Context, _Registry
    from ._discovery import EntryPointItem

log = logging.getLogger("dsh.core")

Disposer = Callable[[], None]
_ids = itertools.count(1)


class FiberState(enum.Enum):
    """Lifecycle of a fiber."""

    PENDING = "pending"
    """Waiting for the services its plugin injects."""
    LOADING = "loading"
    """``apply`` is running."""
    ACTIVE = "active"
    FAILED = "failed"
    """Config was invalid or ``apply`` raised; everything it registered was rolled back."""
    DISPOSED = "disposed"
    """Unloaded for good (set as soon as unloading starts, while its effects run)."""


class _Effect:
    __slots__ = ("_fn", "done", "label", "owner")

    def __init__(self, owner: Fiber, fn: Disposer | None, label: str) -> None:
        self.owner = owner
        self._fn = fn
        self.label = label
        self.done = False

    def dispose(self) -> None:
        """Run the disposer once; later calls do nothing."""
        if self.done:
            return
        self.done = True
        with contextlib.suppress(ValueError):
            self.owner._effects.remove(self)
        if self._fn is not None:
            self._fn()


class Fiber:
    """One loaded plugin: its state, its config, and the effects it registered."""

    def __init__(
        self,
        registry: _Registry,
        parent: Fiber | None,
        plugin: object,
        raw_config: object,
        *,
        label: str | None = None,
        origin: EntryPointItem | None = None,
        essential: bool = True,
    ) -> None:
        self.id = next(_ids)
        self.essential = essential
        self.registry = registry
        self.parent = parent
        self.plugin = plugin
        self.raw_config = raw_config
        self.origin = origin
        self.config: Any = None
        self.state = FiberState.PENDING
        self.error: str | None = None
        self.exception: BaseException | None = None
        self.dispose_errors: list[str] = []
        self.children: list[Fiber] = []
        self.inject: tuple[str, ...] = ()
        self._effects: list[_Effect] = []
        self._provided: list[str] = []
        self._parent_effect: _Effect | None = None
        self.name = self.label = label or "<unnamed>"
        try:
            self.name = plugin_name(plugin)
        except PluginError as exc:
            self._fail(exc)
        self.label = label or self.name

    def __repr__(self) -> str:
        return f"<Fiber {self.label} {self.state.value}>"

    @property
    def context(self) -> Context:
        """A context bound to this fiber."""
        from ._context import Context

        return Context(self)

    @property
    def missing(self) -> list[str]:
        """Injected service names that are not available now."""
        return [name for name in self.inject if not self.registry.available(name)]

    def _fail(self, exc: BaseException) -> None:
        self.state = FiberState.FAILED
        self.exception = exc
        self.error = str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
        log.error("plugin %s failed: %s", self.label, self.error)

    def _prepare(self) -> bool:
        try:
            self.inject = plugin_inject(self.plugin)
            plugin_apply(self.plugin)
            self.config = validate_config(self.plugin, self.raw_config)
        except PluginError as exc:
            self._fail(exc)
            return False
        return True

    def _start(self) -> None:
        if self.state in (FiberState.DISPOSED, FiberState.ACTIVE, FiberState.LOADING):
            return
        if self.missing:
            self.state = FiberState.PENDING
            return
        self.state = FiberState.LOADING
        self.error = None
        self.exception = None
        try:
            plugin_apply(self.plugin)(self.context, self.config)
        except Exception as exc:
            self._unload_effects()
            self._provided.clear()
            message = str(exc) if isinstance(exc, DshError) else f"apply raised {type(exc).__name__}: {exc}"
            self._fail(PluginError(message))
            self.exception = exc
            return
        self.state = FiberState.ACTIVE
        for name in list(self._provided):
            self.registry.service_up(name)

    def _unload_effects(self) -> None:
        # Children first, whenever they were loaded; then the other effects, newest first.
        for child in reversed(list(self.children)):
            if child._parent_effect is not None:
                self._dispose_effect(child._parent_effect)
        while self._effects:
            self._dispose_effect(self._effects[-1])

    def _dispose_effect(self, effect: _Effect) -> None:
        try:
            effect.dispose()
        except Exception as exc:
            message = f"disposer of {effect.label} raised {type(exc).__name__}: {exc}"
            self.dispose_errors.append(message)
            log.error("plugin %s: %s", self.label, message)

    def unload_to_pending(self) -> None:
        """Undo everything this fiber registered and wait for its services again."""
        if self.state is not FiberState.ACTIVE:
            return
        self._unload_effects()
        self.state = FiberState.PENDING

    def reload(self, plugin: object | None = None, raw_config: object = None) -> None:
        """Unload and start again, with a new plugin object or config when given."""
        if self.state is FiberState.DISPOSED:
            raise PluginError(f"plugin '{self.label}' is disposed and cannot reload")
        self._unload_effects()
        if plugin is not None:
            self.plugin = plugin
        if raw_config is not None:
            self.raw_config = raw_config
        self.state = FiberState.PENDING
        self.error = None
        if self._prepare():
            self._start()

    def dispose(self) -> None:
        """Unload for good: children first, then effects in reverse order of registration."""
        if self.state is FiberState.DISPOSED:
            return
        self.state = FiberState.DISPOSED
        self._unload_effects()
        self.registry.forget(self)
        if self._parent_effect is not None:
            self._parent_effect.dispose()

    def walk(self) -> list[Fiber]:
        """This fiber and all its live descendants, depth first."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out
