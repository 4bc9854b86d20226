"""The registry of managed ``DSH_*`` facts."""

from __future__ import annotations

import builtins
import importlib.metadata as md
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dsh.bash import DSH_ENV_PREFIX
from dsh.core import Disposer, DshError, Service, ServiceKey
from dsh.loader import EntryPointItem
from dsh.session import ToolExecution

if TYPE_CHECKING:
    pass

HOME_KEY = DSH_ENV_PREFIX + "HOME"
SHELL_KEY = DSH_ENV_PREFIX + "SHELL"
SESSION_ID_KEY = DSH_ENV_PREFIX + "SESSION_ID"
TOOL_CALL_ID_KEY = DSH_ENV_PREFIX + "TOOL_CALL_ID"
TURN_ID_KEY = DSH_ENV_PREFIX + "TURN_ID"
RESERVED_KEYS = frozenset({HOME_KEY, SHELL_KEY, SESSION_ID_KEY, TOOL_CALL_ID_KEY, TURN_ID_KEY})
KEY_PATTERN = re.compile(re.escape(DSH_ENV_PREFIX) + r"[A-Z][A-Z0-9_]*")
BUILTIN_OWNER = "bash-env"
BUILTIN_DISTRIBUTION = "dsh-bash-env"

_BUILTIN_DESCRIPTIONS = {
    HOME_KEY: "Absolute path of the harness home.",
    SHELL_KEY: "Always 1: this shell was started by the harness for a model tool call.",
    SESSION_ID_KEY: "Id of the agent session that made this call (absent for calls without an agent).",
    TOOL_CALL_ID_KEY: "Id of this tool call, the call_id of its tool/call event in the transcript "
    "(absent for calls without an agent).",
    TURN_ID_KEY: "Id of the turn that made this call (absent for calls without an agent or a turn).",
}


class ContributorError(DshError):
    """A contributor declaration is malformed or conflicts with another."""


class CollectionError(DshError):
    """A contributor failed while a snapshot was being collected."""


@dataclass(frozen=True)
class VariableSpec:
    """The declaration of one managed variable."""

    description: str


@runtime_checkable
class Contributor(Protocol):
    """A source of managed facts: a stable name, declared keys, and a resolver."""

    @property
    def name(self) -> str:
        """Stable, unique contributor name."""
        ...

    @property
    def variables(self) -> Mapping[str, str | VariableSpec]:
        """Every key it may return, each with a description."""
        ...

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        """The values for this call; an omitted key is absent from the child."""
        ...


@dataclass(frozen=True)
class FunctionContributor:
    """A contributor made of a name, declarations and a function."""

    name: str
    variables: Mapping[str, str | VariableSpec]
    resolver: Callable[[ToolExecution], Mapping[str, str]]

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        """Call the resolver."""
        return self.resolver(execution)


@dataclass(frozen=True)
class VariableInfo:
    """One row of the catalogue: a key, its description and who owns it."""

    key: str
    description: str
    owner: str
    distribution: str | None
    version: str | None
    builtin: bool


@dataclass(frozen=True)
class _Entry:
    name: str
    contributor: Contributor
    resolve: Callable[[ToolExecution], Mapping[str, str]]
    descriptions: Mapping[str, str]
    keys: frozenset[str]
    origin: EntryPointItem | None
    builtin: bool


class _State:
    __slots__ = ("entries", "home", "ordered", "owners")

    def __init__(self, home: str) -> None:
        self.home = home
        self.entries: dict[str, _Entry] = {}
        self.owners: dict[str, str] = {}
        self.ordered: tuple[_Entry, ...] = ()

    def reorder(self) -> None:
        self.ordered = tuple(self.entries[n] for n in sorted(self.entries))


def _validate(contributor: object) -> tuple[str, dict[str, str], Callable[[ToolExecution], Mapping[str, str]]]:
    name = getattr(contributor, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise ContributorError(f"contributor {contributor!r} has a blank or missing name")
    resolve = getattr(contributor, "resolve", None)
    if not callable(resolve):
        raise ContributorError(f"contributor '{name}' has no callable resolve")
    variables = getattr(contributor, "variables", None)
    if not isinstance(variables, Mapping) or not variables:
        raise ContributorError(f"contributor '{name}' declares no variables")
    descriptions: dict[str, str] = {}
    for key, spec in variables.items():
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            raise ContributorError(
                f"contributor '{name}' declares key {key!r}, which is not {DSH_ENV_PREFIX} followed by "
                "an upper-case letter and upper-case letters, digits or underscores"
            )
        if key in RESERVED_KEYS:
            raise ContributorError(f"contributor '{name}' declares key '{key}', which is reserved for the harness")
        description = spec.description if isinstance(spec, VariableSpec) else spec
        if isinstance(spec, Mapping):
            description = spec.get("description")
        if not isinstance(description, str) or not description.strip():
            raise ContributorError(f"contributor '{name}' gives key '{key}' a blank description")
        descriptions[key] = description
    return name, descriptions, resolve


class BashEnvRegistry(Service):
    """The ``bash_env`` service: who owns which ``DSH_*`` key, and per-call snapshots.

    Obtained through ``ctx.get(BASH_ENV)``, the registry is bound to the caller, so what
    a plugin registers is an effect of that plugin's fiber.
    """

    def __init__(self, home: str | Path) -> None:
        self._state = _State(str(Path(home).absolute()))

    @property
    def home(self) -> str:
        """The absolute harness home every snapshot carries as ``DSH_HOME``."""
        return self._state.home

    def register(
        self, contributor: Contributor, *, origin: EntryPointItem | None = None, builtin: bool = False
    ) -> Disposer:
        """Add a contributor; raise :class:`ContributorError` naming it (and the key) when malformed.

        Returns an idempotent disposer; unloading the calling plugin disposes it too.
        """
        name, descriptions, resolve = _validate(contributor)
        state = self._state

        def setup() -> Disposer:
            if name in state.entries:
                raise ContributorError(f"a contributor named '{name}' is already registered")
            for key in descriptions:
                owner = state.owners.get(key)
                if owner is not None:
                    raise ContributorError(
                        f"key '{key}' is already owned by contributor '{owner}'; contributor '{name}' cannot declare it"
                    )
            entry = _Entry(name, contributor, resolve, descriptions, frozenset(descriptions), origin, builtin)
            state.entries[name] = entry
            for key in descriptions:
                state.owners[key] = name
            state.reorder()

            def remove() -> None:
                if state.entries.get(name) is entry:
                    del state.entries[name]
                    for key in descriptions:
                        state.owners.pop(key, None)
                    state.reorder()

            return remove

        return self.effect(setup, label=f"bash_env contributor {name}")

    def collect(self, execution: ToolExecution) -> Mapping[str, str]:
        """A new immutable snapshot for one call: built-ins, then each contributor in name order."""
        state = self._state
        out = {HOME_KEY: state.home, SHELL_KEY: "1"}
        agent = execution.agent
        if agent is not None:
            out[SESSION_ID_KEY] = agent.header.id
            out[TOOL_CALL_ID_KEY] = execution.call_id
            if execution.turn_id:
                out[TURN_ID_KEY] = execution.turn_id
        for entry in state.ordered:
            try:
                values = entry.resolve(execution)
            except Exception as exc:
                raise CollectionError(
                    f"contributor '{entry.name}' raised {type(exc).__name__} while resolving: {exc}"
                ) from exc
            keys = entry.keys
            for key, value in values.items():
                if key not in keys:
                    raise CollectionError(f"contributor '{entry.name}' returned undeclared key '{key}'")
                if type(value) is not str:
                    raise CollectionError(
                        f"contributor '{entry.name}' returned a {type(value).__name__} for key '{key}', not a string"
                    )
                out[key] = value
        return MappingProxyType(out)

    def list(self) -> builtins.list[VariableInfo]:
        """Every declared key (built-ins included, marked), sorted by key, without running resolvers."""
        version = _own_version()
        rows = [
            VariableInfo(key, desc, BUILTIN_OWNER, BUILTIN_DISTRIBUTION, version, True)
            for key, desc in _BUILTIN_DESCRIPTIONS.items()
        ]
        for entry in self._state.entries.values():
            dist = entry.origin.distribution if entry.origin else (BUILTIN_DISTRIBUTION if entry.builtin else None)
            ver = entry.origin.version if entry.origin else (version if entry.builtin else None)
            rows.extend(
                VariableInfo(key, desc, entry.name, dist, ver, entry.builtin)
                for key, desc in entry.descriptions.items()
            )
        return sorted(rows, key=lambda r: r.key)

    def contributors(self) -> builtins.list[str]:
        """Names of the registered contributors, sorted."""
        return sorted(self._state.entries)


def _own_version() -> str | None:
    try:
        return md.version(BUILTIN_DISTRIBUTION)
    except md.PackageNotFoundError:
        return None


BASH_ENV: ServiceKey[BashEnvRegistry] = ServiceKey("bash_env")
"""The managed-environment registry service."""


def as_contributor(obj: Any) -> Contributor:
    """An entry point's object as a contributor: the object itself, or what a zero-argument callable returns."""
    # A class has the contributor attributes too, but only its instances can resolve.
    if not isinstance(obj, type) and hasattr(obj, "resolve") and hasattr(obj, "variables"):
        return obj  # type: ignore[no-any-return]
    if callable(obj):
        made = obj()
        if hasattr(made, "resolve") and hasattr(made, "variables"):
            return made  # type: ignore[no-any-return]
        raise ContributorError(f"{obj!r} returned {made!r}, which is not a contributor")
    raise ContributorError(f"{obj!r} is neither a contributor nor a callable returning one")
