"""Typed service keys, and the base class that binds a service to each caller."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

if TYPE_CHECKING:
    from ._context import Context

T = TypeVar("T")

Disposer = Callable[[], None]
"""Undoes one effect; calling it again does nothing."""


class ServiceKey(Generic[T]):
    """A typed name for a service: ``ctx.get(KEY)`` returns ``T | None`` to a type checker.

    Keys compare by name, so two packages that declare the same name mean the same service.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not name.strip():
            raise ValueError("a service key needs a non-blank name")
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServiceKey) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def key_name(key: ServiceKey[Any] | str) -> str:
    """Return the service name of ``key``."""
    return key.name if isinstance(key, ServiceKey) else key


class Service:
    """Base class of a service whose methods act for the plugin that looked it up.

    ``ctx.get(KEY)`` hands each caller a shallow view of the service whose :attr:`caller` is the
    caller's context; everything the view registers through :meth:`effect` belongs to the
    caller's fiber and goes away when that plugin unloads (``bash_env.register``,
    ``tools.register``). Keep shared state in attributes (the view shares their objects); do not
    use ``__slots__`` in subclasses.
    """

    caller: Context | None = None
    """The context the service was looked up from; None on the provider's own instance."""

    def bind(self, ctx: Context) -> Self:
        """A view of this service acting for ``ctx``."""
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.caller = ctx
        return view

    def effect(self, setup: Callable[[], Disposer | None], *, label: str) -> Disposer:
        """Run ``setup`` as an effect of the caller's fiber (plainly when there is no caller)."""
        if self.caller is not None:
            return self.caller.effect(setup, label=label)
        return setup() or _noop


def _noop() -> None:
    return None
