"""Typed service keys and the per-caller binding protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from ._context import Context

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


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


@runtime_checkable
class CallerBound(Protocol[T_co]):
    """A service that hands each caller a view bound to the caller's fiber.

    ``ctx.get`` calls ``__dsh_bind__(ctx)`` on such a service, so effects that the view's
    methods register (``bash_env.register``, ``tools.register``) belong to the plugin that
    called them and vanish when that plugin unloads.
    """

    def __dsh_bind__(self, ctx: Context) -> T_co:
        """Return the view of this service for ``ctx``."""
        ...


def key_name(key: ServiceKey[Any] | str) -> str:
    """Return the service name of ``key``."""
    return key.name if isinstance(key, ServiceKey) else key
