"""Contexts: a plugin's handle on the kernel, bound to the plugin's own fiber."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from ._errors import PluginError, ServiceConflictError
from ._fiber import Disposer, Fiber, FiberState, _Effect
from ._plugin import Plugin
from ._services import CallerBound, ServiceKey, key_name

if TYPE_CHECKING:
    from ._discovery import EntryPointItem

T = TypeVar("T")


class _Registry:
    """State shared by every context of one kernel: services and live fibers."""

    def __init__(self) -> None:
        self.services: dict[str, tuple[object, Fiber]] = {}
        self.fibers: list[Fiber] = []

    def available(self, name: str) -> bool:
        entry = self.services.get(name)
        return entry is not None and entry[1].state in (FiberState.LOADING, FiberState.ACTIVE)

    def lookup(self, name: str) -> object | None:
        entry = self.services.get(name)
        if entry is None or entry[1].state not in (FiberState.LOADING, FiberState.ACTIVE):
            return None
        return entry[0]

    def service_up(self, name: str) -> None:
        for fiber in list(self.fibers):
            if fiber.state is FiberState.PENDING and name in fiber.inject and not fiber.missing:
                fiber._start()

    def service_down(self, name: str, provider: Fiber) -> None:
        for fiber in list(self.fibers):
            if fiber is not provider and fiber.state is FiberState.ACTIVE and name in fiber.inject:
                fiber.unload_to_pending()

    def forget(self, fiber: Fiber) -> None:
        with contextlib.suppress(ValueError):
            self.fibers.remove(fiber)


class Context:
    """A plugin's view of the kernel; everything it registers belongs to :attr:`fiber`."""

    __slots__ = ("fiber",)

    def __init__(self, fiber: Fiber) -> None:
        self.fiber = fiber

    @classmethod
    def root(cls, name: str = "root") -> Context:
        """Create a new kernel and return the context of its (active) root fiber."""
        registry = _Registry()
        fiber = Fiber(registry, None, Plugin(name=name, apply=lambda ctx, cfg: None), None)
        fiber.state = FiberState.ACTIVE
        registry.fibers.append(fiber)
        return cls(fiber)

    def __repr__(self) -> str:
        return f"<Context of {self.fiber!r}>"

    def effect(self, setup: Callable[[], Disposer | None], *, label: str | None = None) -> Disposer:
        """Run ``setup`` now and keep its disposer as an effect of this fiber.

        If ``setup`` raises, every effect it registered on this fiber is rolled back and the
        error propagates. The returned disposer is idempotent.
        """
        fiber = self.fiber
        if fiber.state in (FiberState.DISPOSED, FiberState.FAILED):
            raise PluginError(f"plugin '{fiber.label}' is {fiber.state.value} and cannot register effects")
        mark = len(fiber._effects)
        try:
            dispose = setup()
        except BaseException:
            while len(fiber._effects) > mark:
                fiber._effects[-1].dispose()
            raise
        effect = _Effect(fiber, dispose, label or str(getattr(setup, "__qualname__", "effect")))
        fiber._effects.append(effect)
        return effect.dispose

    def plugin(
        self,
        plugin: object,
        config: object = None,
        *,
        label: str | None = None,
        origin: EntryPointItem | None = None,
        essential: bool = True,
    ) -> Fiber:
        """Load ``plugin`` in a child fiber; it starts once the services it injects exist.

        A malformed plugin, invalid config or raising ``apply`` leave the child FAILED
        (with the reason on :attr:`Fiber.error`) and never raise here. A non-``essential``
        child's failure is a warning of the deployment, not a boot failure.
        """
        parent = self.fiber
        child = Fiber(parent.registry, parent, plugin, config, label=label, origin=origin, essential=essential)
        parent.registry.fibers.append(child)
        parent.children.append(child)

        def detach() -> None:
            child.dispose()
            if child in parent.children:
                parent.children.remove(child)

        effect = _Effect(parent, detach, f"plugin {child.label}")
        parent._effects.append(effect)
        child._parent_effect = effect
        if child.state is not FiberState.FAILED and child._prepare():
            child._start()
        return child

    def provide(self, key: ServiceKey[T] | str, value: T) -> Disposer:
        """Provide a service under ``key`` for as long as this fiber is loaded."""
        name = key_name(key)
        registry = self.fiber.registry
        fiber = self.fiber

        def setup() -> Disposer:
            existing = registry.services.get(name)
            if existing is not None and existing[1].state is not FiberState.DISPOSED:
                raise ServiceConflictError(
                    f"service '{name}' is already provided by plugin '{existing[1].label}'; "
                    f"plugin '{fiber.label}' cannot provide it too"
                )
            registry.services[name] = (value, fiber)
            fiber._provided.append(name)
            if fiber.state is FiberState.ACTIVE:
                registry.service_up(name)

            def remove() -> None:
                if registry.services.get(name, (None, None))[1] is fiber:
                    del registry.services[name]
                if name in fiber._provided:
                    fiber._provided.remove(name)
                registry.service_down(name, fiber)

            return remove

        return self.effect(setup, label=f"service {name}")

    @overload
    def get(self, key: ServiceKey[T]) -> T | None: ...

    @overload
    def get(self, key: str) -> Any: ...

    def get(self, key: ServiceKey[T] | str) -> T | Any | None:
        """Return the service while its provider is active, else ``None``.

        A :class:`CallerBound` service is returned as the view bound to this context.
        """
        value = self.fiber.registry.lookup(key_name(key))
        # hasattr on the type, not isinstance on a runtime protocol: this runs on every shell call.
        if value is not None and hasattr(type(value), "__dsh_bind__"):
            return cast(CallerBound[T], value).__dsh_bind__(self)
        return value

    def require(self, key: ServiceKey[T]) -> T:
        """Like :meth:`get`, but raise naming the service when it is absent."""
        value = self.get(key)
        if value is None:
            raise PluginError(f"service '{key.name}' is not available to plugin '{self.fiber.label}'")
        return value

    @property
    def root_fiber(self) -> Fiber:
        """The root fiber of this kernel."""
        fiber = self.fiber
        while fiber.parent is not None:
            fiber = fiber.parent
        return fiber
