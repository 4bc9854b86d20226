"""Typed service keys, the base class that binds a service to each caller, and keyed registries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from ._errors import RegistrationConflictError

if TYPE_CHECKING:
    from ._context import Context

T = TypeVar("T")
V = TypeVar("V")

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

    def register_keyed(self, registry: Registry[V], key: str, value: V) -> Disposer:
        """Add ``value`` under ``key`` as an effect of the caller's fiber (label ``<kind> <key>``).

        A key another registration holds raises :class:`RegistrationConflictError` naming both
        plugins; unloading the caller (or the returned disposer) removes the entry.
        """
        claimant = self.claimant()
        return self.effect(lambda: registry.claim(key, value, claimant), label=f"{registry.kind} {key}")

    def claimant(self) -> str | None:
        """Label of the calling plugin, as a :class:`Registry` records its owner (None: the host)."""
        return None if self.caller is None else self.caller.fiber.label


class _Entry(Generic[V]):
    __slots__ = ("owner", "value")

    def __init__(self, value: V, owner: str | None) -> None:
        self.value = value
        self.owner = owner


class Registry(Generic[V]):
    """Values under unique keys, each remembering the plugin that registered it.

    A service keeps one in an attribute (its caller-bound views share it) and adds to it only
    through :meth:`Service.register_keyed`, or, to claim several keys in one effect (a bash-env
    contributor and the ``DSH_*`` keys it declares), through :meth:`claim` inside its own
    :meth:`Service.effect`; either way every entry is an effect of its plugin's fiber.
    Iteration and :meth:`values` go in key order.
    """

    __slots__ = ("_entries", "kind")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        """What the values are, as errors and effect labels name them (``tool``, ``skill source``)."""
        self._entries: dict[str, _Entry[V]] = {}

    def __repr__(self) -> str:
        return f"<Registry of {self.kind}: {', '.join(self)}>"

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def get(self, key: str) -> V | None:
        """The value under ``key``, if registered."""
        entry = self._entries.get(key)
        return None if entry is None else entry.value

    def owner(self, key: str) -> str | None:
        """Label of the plugin that registered ``key`` (None when it is free or the host registered it)."""
        entry = self._entries.get(key)
        return None if entry is None else entry.owner

    def values(self) -> list[V]:
        """Every value, in key order (a copy taken in one step: a registration may go on meanwhile)."""
        entries = self._entries.copy()
        return [entries[key].value for key in sorted(entries)]

    def claim(self, key: str, value: V, owner: str | None) -> Disposer:
        """Add ``value`` under ``key`` for ``owner`` (a plugin label, None: the host); the disposer removes it.

        Call it only inside an effect (:meth:`Service.effect`), so the entry goes when its plugin
        unloads; a key already held raises :class:`RegistrationConflictError` naming both owners.
        """
        entry = self._add(key, value, owner)
        return lambda: self._discard(key, entry)

    def _add(self, key: str, value: V, owner: str | None) -> _Entry[V]:
        held = self._entries.get(key)
        if held is not None:
            raise RegistrationConflictError(
                f"{self.kind} '{key}' is already registered by {_who(held.owner)}; "
                f"{_who(owner)} cannot register it too",
                plugin=owner,
                kind=self.kind,
                key=key,
                owner=held.owner,
            )
        entry = _Entry(value, owner)
        self._entries[key] = entry
        return entry

    def _discard(self, key: str, entry: _Entry[V]) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]


def _who(label: str | None) -> str:
    return "the host" if label is None else f"plugin '{label}'"


def _noop() -> None:
    return None
