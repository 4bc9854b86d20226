"""Contexts: a plugin's handle on the kernel, bound to the plugin's own fiber."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from ._errors import PluginError, ServiceConflictError
from ._fiber import Fiber, FiberState, Guard, Kernel
from ._plugin import ConfigValidator, Plugin
from ._services import Disposer, Service, ServiceKey, key_name

T = TypeVar("T")


class Context:
    """A plugin's view of the kernel; everything it registers is an effect of :attr:`fiber`."""

    __slots__ = ("fiber",)

    def __init__(self, fiber: Fiber) -> None:
        self.fiber = fiber

    @classmethod
    def root(
        cls, name: str = "root", *, validate: ConfigValidator | None = None, guard: Guard | None = None
    ) -> Context:
        """Create a new kernel and return the context of its (active) root fiber.

        ``validate`` checks plugin configs (without one only empty and in-code configs load);
        ``guard`` runs plugin code. ``dsh.loader.root()`` passes dsh-loader's (pydantic, containment).
        """
        kernel = Kernel(validate, guard)
        fiber = Fiber(kernel, None, Plugin(name=name, apply=lambda ctx, cfg: None), None, cls)
        fiber.state = FiberState.ACTIVE
        kernel.fibers[fiber] = None
        return cls(fiber)

    def __repr__(self) -> str:
        return f"<Context of {self.fiber!r}>"

    def effect(self, setup: Callable[[], Disposer | None], *, label: str | None = None) -> Disposer:
        """Run ``setup`` now and keep its disposer as an effect of this fiber.

        If ``setup`` raises, every effect it registered on this fiber is rolled back and the
        error propagates. The returned disposer is idempotent.
        """
        return self.fiber.add_effect(setup, label or str(getattr(setup, "__qualname__", "effect")))

    def plugin(
        self,
        plugin: object,
        config: object = None,
        *,
        label: str | None = None,
        origin: Any = None,
        essential: bool = True,
    ) -> Fiber:
        """Load ``plugin`` in a child fiber (an effect of this one); it starts once its services exist.

        A malformed plugin, invalid config or raising ``apply`` leave the child FAILED (with the
        reason on :attr:`Fiber.error`) and never raise here. A non-``essential`` child's failure
        is a warning of the deployment, not a boot failure.
        """
        parent = self.fiber
        child = Fiber(
            parent.kernel, parent, plugin, config, type(self), label=label, origin=origin, essential=essential
        )

        def load() -> Disposer:
            parent.kernel.fibers[child] = None
            if child.prepare():
                child.start()
            return child.dispose

        parent.add_effect(load, f"plugin {child.label}", child)
        return child

    def provide(self, key: ServiceKey[T] | str, value: T) -> Disposer:
        """Provide a service under ``key`` for as long as this fiber is loaded."""
        name = key_name(key)
        fiber = self.fiber
        kernel = fiber.kernel

        def setup() -> Disposer:
            existing = kernel.services.get(name)
            if existing is not None and existing[1].state is not FiberState.DISPOSED:
                holder = existing[1].label
                raise ServiceConflictError(
                    f"service '{name}' is already provided by plugin '{holder}'; "
                    f"plugin '{fiber.label}' cannot provide it too",
                    plugin=fiber.label,
                    service=name,
                    provider=holder,
                )
            kernel.services[name] = (value, fiber)
            fiber.provides = True
            if fiber.state is FiberState.ACTIVE:
                kernel.service_up(name)

            def remove() -> None:
                if kernel.services.get(name, (None, None))[1] is fiber:
                    del kernel.services[name]
                kernel.service_down(name, fiber)

            return remove

        return self.effect(setup, label=f"service {name}")

    @overload
    def get(self, key: ServiceKey[T]) -> T | None: ...

    @overload
    def get(self, key: str) -> Any: ...

    def get(self, key: ServiceKey[T] | str) -> T | Any | None:
        """Return the service while its provider is active, else ``None``.

        A :class:`Service` is returned as the view bound to this context.
        """
        value = self.fiber.kernel.lookup(key_name(key))
        return value.bind(self) if isinstance(value, Service) else value

    def require(self, key: ServiceKey[T]) -> T:
        """Like :meth:`get`, but raise naming the service when it is absent."""
        value = self.get(key)
        if value is None:
            raise PluginError(
                f"service '{key.name}' is not available to plugin '{self.fiber.label}'", plugin=self.fiber.label
            )
        return value
