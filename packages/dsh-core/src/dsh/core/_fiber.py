"""Fibers and effects: the one lifecycle of everything a plugin registers.

A fiber is one loaded plugin. Everything it registers is an effect: a disposer kept in order. A
child plugin is an effect of its parent too (its disposer disposes the child), so unloading a
fiber is always the same walk: child fibers first, then the other effects, newest first.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from dsh.paths.log import logger

from ._errors import DshError, PluginError, describe
from ._plugin import ConfigValidator, plugin_apply, plugin_config, plugin_inject, plugin_name
from ._services import Disposer

if TYPE_CHECKING:
    from ._context import Context


def _log_error(message: str, *args: object) -> None:
    logger("dsh.core").error(message, *args)


_ids = itertools.count(1)

T = TypeVar("T")

Guard = Callable[[Callable[[], Any]], Any]
"""Runs one call of plugin code (``apply``, a disposer) and returns what it returned. The kernel
fails a fiber on an ``Exception``; a guard that must contain more (``SystemExit``, a plugin's own
``KeyboardInterrupt``) turns it into one: dsh-loader's ``contained`` does."""


def _call(call: Callable[[], T]) -> T:
    return call()


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


_LIVE = (FiberState.LOADING, FiberState.ACTIVE)


class Effect:
    """One registration of a fiber and the disposer that undoes it (read :attr:`label`)."""

    __slots__ = ("_dispose", "_owner", "child", "label")

    def __init__(self, owner: Fiber, dispose: Disposer | None, label: str, child: Fiber | None = None) -> None:
        self._owner = owner
        self._dispose = dispose
        self.label = label
        """What the effect registered, as ``dsh plugins`` and tests show it."""
        self.child = child
        """The child fiber, when this effect is a child plugin."""

    def __repr__(self) -> str:
        return f"<Effect {self.label}>"

    def dispose(self) -> None:
        """Undo the effect once; later calls do nothing."""
        dispose, self._dispose = self._dispose, None
        if self._owner._effects.pop(self, False) is False:  # a dict: O(1), however many effects
            return
        if dispose is not None:
            dispose()


class Kernel:
    """What every fiber of one tree shares: the services and the live fibers."""

    def __init__(self, validate: ConfigValidator | None = None, guard: Guard | None = None) -> None:
        self.validate = validate
        """Validates plugin configs (None: only empty and in-code configs are accepted)."""
        self.guard: Guard = guard or _call
        """Runs plugin code; the default lets every ``BaseException`` that is no ``Exception`` through."""
        self.services: dict[str, tuple[object, Fiber]] = {}
        self.fibers: dict[Fiber, None] = {}
        """The live fibers in loading order (a dict used as an ordered set: a dispose is O(1))."""

    def lookup(self, name: str) -> object | None:
        """The service ``name`` while its provider is loading or active, else None."""
        entry = self.services.get(name)
        return entry[0] if entry is not None and entry[1].state in _LIVE else None

    def available(self, name: str) -> bool:
        """Whether ``name`` is provided by a live fiber."""
        entry = self.services.get(name)
        return entry is not None and entry[1].state in _LIVE

    def service_up(self, name: str) -> None:
        """Start the pending fibers that were waiting for ``name``."""
        for fiber in list(self.fibers):
            if fiber.state is FiberState.PENDING and name in fiber.inject and not fiber.missing:
                fiber.start()

    def service_down(self, name: str, provider: Fiber) -> None:
        """Send the active dependents of ``name`` back to pending."""
        for fiber in list(self.fibers):
            if fiber is not provider and fiber.state is FiberState.ACTIVE and name in fiber.inject:
                fiber.unload_to_pending()


class Fiber:
    """One loaded plugin: its state, its config, its children and the effects it registered."""

    def __init__(
        self,
        kernel: Kernel,
        parent: Fiber | None,
        plugin: object,
        raw_config: object,
        make_context: Callable[[Fiber], Context],
        *,
        label: str | None = None,
        origin: Any = None,
        essential: bool = True,
    ) -> None:
        self.id = next(_ids)
        self.kernel = kernel
        self.parent = parent
        self.plugin = plugin
        self.raw_config = raw_config
        self.origin = origin
        """Where the plugin came from (a loader's entry-point item), or None."""
        self.essential = essential
        """False for optional fibers (auto-discovered contributors): their failure is a warning."""
        self.config: Any = None
        self.state = FiberState.PENDING
        self.error: str | None = None
        self.dispose_errors: list[str] = []
        self.inject: tuple[str, ...] = ()
        # An ordered set (insertion order is registration order): a dispose removes its effect in
        # O(1), where a list made unloading n children quadratic.
        self._effects: dict[Effect, None] = {}
        self._holder: Effect | None = None
        """The effect of the parent that loaded this fiber (disposing one disposes the other)."""
        self.provides = False
        """Whether this fiber ever provided a service (set by :meth:`Context.provide`)."""
        self._make_context = make_context
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
        return self._make_context(self)

    @property
    def effects(self) -> tuple[Effect, ...]:
        """The live effects, oldest first (read-only: dispose one through its disposer)."""
        return tuple(self._effects)

    @property
    def children(self) -> list[Fiber]:
        """Child fibers loaded by this one and not yet disposed, oldest first."""
        return [e.child for e in self._effects if e.child is not None]

    @property
    def missing(self) -> list[str]:
        """Injected service names that are not available now."""
        return [name for name in self.inject if not self.kernel.available(name)]

    def walk(self) -> Iterator[Fiber]:
        """This fiber and all its live descendants, depth first."""
        # A stack, not nested generators: every fiber would pass through one generator per level.
        stack = [self]
        while stack:
            fiber = stack.pop()
            yield fiber
            stack.extend(reversed(fiber.children))

    # -- the one primitive -------------------------------------------------------------

    def add_effect(self, setup: Callable[[], Disposer | None], label: str, child: Fiber | None = None) -> Disposer:
        """Run ``setup`` and keep its disposer; on a raise, roll back what it registered and re-raise."""
        if self.state in (FiberState.DISPOSED, FiberState.FAILED):
            raise PluginError(
                f"plugin '{self.label}' is {self.state.value} and cannot register effects", plugin=self.label
            )
        mark = len(self._effects)
        try:
            dispose = setup()
        except BaseException:
            while len(self._effects) > mark:
                next(reversed(self._effects)).dispose()
            raise
        effect = Effect(self, dispose, label, child)
        self._effects[effect] = None
        if child is not None:
            child._holder = effect
        return effect.dispose

    def _unload_effects(self) -> None:
        # Children first, whenever they were loaded; then the other effects, newest first.
        for effect in [e for e in reversed(self._effects) if e.child is not None]:
            self._dispose_effect(effect)
        while self._effects:
            self._dispose_effect(next(reversed(self._effects)))

    def _dispose_effect(self, effect: Effect) -> None:
        try:
            self.kernel.guard(effect.dispose)
        except Exception as exc:
            message = f"disposer of {effect.label} raised {describe(exc)}"
            self.dispose_errors.append(message)
            _log_error("plugin %s: %s", self.label, message)

    # -- lifecycle -----------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        self.state = FiberState.FAILED
        self.error = str(exc) if isinstance(exc, PluginError) else describe(exc)
        _log_error("plugin %s failed: %s", self.label, self.error)

    def prepare(self) -> bool:
        """Check the plugin's shape and validate its config; False (and FAILED) when either is wrong."""
        if self.state is FiberState.FAILED:
            return False
        try:
            self.inject = plugin_inject(self.plugin)
            plugin_apply(self.plugin)
            self.config = plugin_config(self.plugin, self.raw_config, self.kernel.validate)
        except PluginError as exc:
            self._fail(exc)
            return False
        return True

    def start(self) -> None:
        """Run ``apply`` when every injected service exists; stay pending otherwise."""
        if self.state is not FiberState.PENDING:  # loading, active, failed or disposed
            return
        if self.inject and self.missing:
            return
        self.state = FiberState.LOADING
        self.error = None
        try:
            apply, context, config = plugin_apply(self.plugin), self._make_context(self), self.config
            self.kernel.guard(lambda: apply(context, config))
        except Exception as exc:
            self._unload_effects()
            message = str(exc) if isinstance(exc, DshError) else f"apply raised {describe(exc)}"
            self._fail(PluginError(message, plugin=self.label))
            return
        self.state = FiberState.ACTIVE
        if self.provides:  # most fibers provide nothing: no walk over every service for them
            for name, (_, provider) in list(self.kernel.services.items()):
                if provider is self:
                    self.kernel.service_up(name)

    def unload_to_pending(self) -> None:
        """Undo everything this fiber registered and wait for its services again."""
        if self.state is not FiberState.ACTIVE:
            return
        self._unload_effects()
        self.state = FiberState.PENDING

    def reload(self, plugin: object | None = None, raw_config: object = None) -> None:
        """Unload and start again, with a new plugin object or config when given."""
        if self.state is FiberState.DISPOSED:
            raise PluginError(f"plugin '{self.label}' is disposed and cannot reload", plugin=self.label)
        self._unload_effects()
        if plugin is not None:
            self.plugin = plugin
        if raw_config is not None:
            self.raw_config = raw_config
        self.state = FiberState.PENDING
        self.error = None
        if self.prepare():
            self.start()

    def dispose(self) -> None:
        """Unload for good: children first, then effects in reverse order of registration."""
        if self.state is FiberState.DISPOSED:
            return
        self.state = FiberState.DISPOSED
        self._unload_effects()
        self.kernel.fibers.pop(self, None)
        if self._holder is not None:
            self._holder.dispose()
