"""The registry of managed ``DSH_*`` facts."""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from dsh.bash import DSH_ENV_PREFIX
from dsh.core import Disposer, Service, ServiceKey
from dsh.loader import EntryPointItem
from dsh.session import ToolExecution

from ._errors import CollectionError, ContributorError
from ._workers import _WORKERS

HOME_KEY = DSH_ENV_PREFIX + "HOME"
SHELL_KEY = DSH_ENV_PREFIX + "SHELL"
SESSION_ID_KEY = DSH_ENV_PREFIX + "SESSION_ID"
TOOL_CALL_ID_KEY = DSH_ENV_PREFIX + "TOOL_CALL_ID"
TURN_ID_KEY = DSH_ENV_PREFIX + "TURN_ID"
RESERVED_KEYS = frozenset({HOME_KEY, SHELL_KEY, SESSION_ID_KEY, TOOL_CALL_ID_KEY, TURN_ID_KEY})
KEY_PATTERN = re.compile(re.escape(DSH_ENV_PREFIX) + r"[A-Z][A-Z0-9_]*")
BUILTIN_OWNER = "bash-env"
BUILTIN_DISTRIBUTION = "dsh-bash-env"

DEFAULT_RESOLVE_TIMEOUT = 1.0
"""Seconds each contributor's ``resolve()`` may take before its call fails (``resolve_timeout``)."""
MAX_OVERDUE = 4
"""Resolves of one contributor that may still run past their deadline before its calls fail at once."""
MAX_VALUE_BYTES = 32 * 1024
"""Largest value (UTF-8 bytes) a contributor may return for one key.

Linux refuses any single ``KEY=value`` string over 128 KiB in a child's environment and the whole
environment and argv over about 2 MiB; 32 KiB leaves room for several large facts and the
user's own environment. Values are facts (ids, paths, regions), not payloads.
"""

MAX_SNAPSHOT_BYTES = 256 * 1024
"""Largest total (keys and values, in characters) of one call's managed variables.

Many keys each under :data:`MAX_VALUE_BYTES` could still exceed what the kernel accepts for a
child's environment; the collection fails naming the largest key instead of the exec failing later.
"""

_BUILTIN_DESCRIPTIONS = {
    HOME_KEY: "Absolute path of the harness home.",
    SHELL_KEY: "Always 1: this shell was started by the harness for a model tool call.",
    SESSION_ID_KEY: "Id of the agent session that made this call (absent for calls without an agent).",
    TOOL_CALL_ID_KEY: "Id of this tool call, the call_id of its tool/call event in the transcript "
    "(absent for calls without an agent).",
    TURN_ID_KEY: "Id of the turn that made this call (absent for calls without an agent or a turn).",
}


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
    __slots__ = ("entries", "home", "ordered", "overdue", "owners", "timeout")

    def __init__(self, home: str, timeout: float) -> None:
        self.home = home
        self.timeout = timeout
        self.entries: dict[str, _Entry] = {}
        self.owners: dict[str, str] = {}
        self.ordered: tuple[_Entry, ...] = ()
        # Resolves that passed their deadline and still run (a thread cannot be killed). Other
        # calls of that contributor still get their own resolve, up to MAX_OVERDUE stuck ones;
        # past that they fail at once instead of piling up a thread per call.
        self.overdue: dict[str, set[concurrent.futures.Future[Mapping[str, str]]]] = {}

    def reorder(self) -> None:
        self.ordered = tuple(self.entries[n] for n in sorted(self.entries))


def _validate(contributor: object) -> tuple[str, dict[str, str], Callable[[ToolExecution], Mapping[str, str]]]:
    name = getattr(contributor, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise ContributorError(f"contributor {contributor!r} has a blank or missing name")
    resolve = getattr(contributor, "resolve", None)
    if not callable(resolve):
        raise ContributorError(f"contributor '{name}' has no callable resolve", contributor=name)
    variables = getattr(contributor, "variables", None)
    if not isinstance(variables, Mapping) or not variables:
        raise ContributorError(f"contributor '{name}' declares no variables", contributor=name)
    descriptions: dict[str, str] = {}
    for key, spec in variables.items():
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            raise ContributorError(
                f"contributor '{name}' declares key {key!r}, which is not {DSH_ENV_PREFIX} followed by "
                "an upper-case letter and upper-case letters, digits or underscores",
                contributor=name,
                key=key,
            )
        if key in RESERVED_KEYS:
            raise ContributorError(
                f"contributor '{name}' declares key '{key}', which is reserved for the harness",
                contributor=name,
                key=key,
            )
        description = spec.description if isinstance(spec, VariableSpec) else spec
        if isinstance(spec, Mapping):
            description = spec.get("description")
        if not isinstance(description, str) or not description.strip():
            raise ContributorError(
                f"contributor '{name}' gives key '{key}' a blank description", contributor=name, key=key
            )
        descriptions[key] = description
    return name, descriptions, resolve


class BashEnvRegistry(Service):
    """The ``bash_env`` service: who owns which ``DSH_*`` key, and per-call snapshots.

    Obtained through ``ctx.get(BASH_ENV)``, the registry is bound to the caller, so what
    a plugin registers is an effect of that plugin's fiber.
    """

    def __init__(
        self, home: str | Path, *, resolve_timeout: float = DEFAULT_RESOLVE_TIMEOUT, version: str | None = None
    ) -> None:
        if not resolve_timeout > 0:
            raise ValueError(f"resolve_timeout must be a positive number of seconds, not {resolve_timeout!r}")
        self._state = _State(str(Path(home).absolute()), resolve_timeout)
        self._version = version
        """dsh-bash-env's version as discovery found it (None: ask importlib.metadata when listing)."""

    @property
    def resolve_timeout(self) -> float:
        """Seconds each contributor's ``resolve()`` may take."""
        return self._state.timeout

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
                raise ContributorError(f"a contributor named '{name}' is already registered", contributor=name)
            for key in descriptions:
                owner = state.owners.get(key)
                if owner is not None:
                    raise ContributorError(
                        f"key '{key}' is already owned by contributor '{owner}'; "
                        f"contributor '{name}' cannot declare it",
                        contributor=name,
                        key=key,
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
        """A new immutable snapshot for one call: built-ins, then each contributor in name order.

        Blocks the calling thread for up to the deadline of each contributor; inside an event
        loop use :meth:`collect_async`.
        """
        out = self._builtins(execution)
        for entry in self._state.ordered:
            future = self._start(entry, execution)
            try:
                out.update(future.result(self._state.timeout))
            except concurrent.futures.TimeoutError:
                raise self._overdue(entry, future) from None
        return self._sealed(out)

    async def collect_async(self, execution: ToolExecution) -> Mapping[str, str]:
        """:meth:`collect` without blocking the event loop: other calls go on while a contributor resolves."""
        out = self._builtins(execution)
        for entry in self._state.ordered:
            future = self._start(entry, execution)
            if not future.done():
                waiting = asyncio.wrap_future(future)
                await asyncio.wait((waiting,), timeout=self._state.timeout)
                if not waiting.done():
                    waiting.cancel()  # stop waiting; the resolve itself cannot be stopped
                    raise self._overdue(entry, future)
                # The failure is raised from `future` below; mark the loop's copy of it as seen, or
                # its finaliser logs "exception was never retrieved" from inside a later collection.
                waiting.exception()
            out.update(future.result())
        return self._sealed(out)

    def _builtins(self, execution: ToolExecution) -> dict[str, str]:
        out = {HOME_KEY: self._state.home, SHELL_KEY: "1"}
        agent = execution.agent
        if agent is not None:
            out[SESSION_ID_KEY] = agent.header.id
            out[TOOL_CALL_ID_KEY] = execution.call_id
            if execution.turn_id:
                out[TURN_ID_KEY] = execution.turn_id
        return out

    def _start(self, entry: _Entry, execution: ToolExecution) -> concurrent.futures.Future[Mapping[str, str]]:
        """Run one ``resolve()`` on a worker thread; its outcome, never a raise, lands in the future."""
        stuck = self._state.overdue.get(entry.name, ())
        if len(stuck) >= MAX_OVERDUE:
            raise CollectionError(
                f"contributor {_who(entry)} is still running {len(stuck)} resolve() calls that passed their "
                f"{self._state.timeout:g} s deadline; this call fails without starting another",
                contributor=entry.name,
            )
        future: concurrent.futures.Future[Mapping[str, str]] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return  # nobody waits any more
            try:
                # The result is read here too, under the deadline: a mapping whose items() sleeps or
                # raises must not run on the caller's thread (or the server's event loop).
                checked: dict[str, str] = {}
                self._check(entry, entry.resolve(execution), checked)
                future.set_result(checked)
            except CollectionError as exc:
                future.set_exception(exc)
            except BaseException as exc:
                # Even SystemExit or KeyboardInterrupt: on this thread none can come from the
                # terminal, so each is the contributor's failure, reported as such.
                detail = f": {exc}" if str(exc) else ""
                future.set_exception(
                    CollectionError(f"contributor {_who(entry)} raised {type(exc).__name__} while resolving{detail}")
                )

        if entry.builtin:
            run()  # the harness's own contributors: no thread hop on every call
        else:
            _WORKERS.submit(run)
        return future

    def _overdue(self, entry: _Entry, future: concurrent.futures.Future[Mapping[str, str]]) -> CollectionError:
        stuck = self._state.overdue.setdefault(entry.name, set())
        stuck.add(future)
        future.add_done_callback(stuck.discard)
        return CollectionError(
            f"contributor {_who(entry)} did not resolve within its {self._state.timeout:g} s deadline "
            "(bash-env config resolve_timeout)"
        )

    @staticmethod
    def _sealed(out: dict[str, str]) -> Mapping[str, str]:
        total = sum(len(k) + len(v) for k, v in out.items())
        if total > MAX_SNAPSHOT_BYTES:
            largest = max(out, key=lambda k: len(out[k]))
            raise CollectionError(
                f"the managed variables of this call add up to {total} characters; the maximum is "
                f"{MAX_SNAPSHOT_BYTES} (largest: '{largest}')",
                key=largest,
            )
        return MappingProxyType(out)

    @staticmethod
    def _check(entry: _Entry, values: object, out: dict[str, str]) -> None:
        if not isinstance(values, Mapping):
            raise CollectionError(
                f"contributor {_who(entry)} returned {type(values).__name__} from resolve(), "
                "not a mapping of keys to strings",
                contributor=entry.name,
            )
        keys = entry.keys
        for key, value in values.items():
            if key not in keys:
                raise CollectionError(
                    f"contributor {_who(entry)} returned undeclared key '{key}'", contributor=entry.name, key=key
                )
            if type(value) is not str:
                raise CollectionError(
                    f"contributor {_who(entry)} returned a {type(value).__name__} for key '{key}', not a string",
                    contributor=entry.name,
                    key=key,
                )
            if "\0" in value:
                raise CollectionError(
                    f"contributor {_who(entry)} returned a NUL character in key '{key}'",
                    contributor=entry.name,
                    key=key,
                )
            size = len(value.encode("utf-8", "surrogateescape"))
            if size > MAX_VALUE_BYTES:
                raise CollectionError(
                    f"contributor {_who(entry)} returned {size} bytes for key '{key}'; "
                    f"the maximum is {MAX_VALUE_BYTES} bytes",
                    contributor=entry.name,
                    key=key,
                )
            out[key] = value

    def list(self) -> builtins.list[VariableInfo]:
        """Every declared key (built-ins included, marked), sorted by key, without running resolvers."""
        version = self._version or _own_version()
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


def _who(entry: _Entry) -> str:
    """A contributor as errors name it: its name and, when it came from one, its distribution."""
    origin = entry.origin
    return f"'{entry.name}' ({origin.distribution} {origin.version})" if origin else f"'{entry.name}'"


def _own_version() -> str | None:
    import importlib.metadata as md  # only when discovery did not say (bash-env loaded as module:attr)

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
