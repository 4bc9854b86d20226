"""The registry of managed ``DSH_*`` facts: who owns which key, and per-call snapshots."""

import builtins
import contextlib
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from dsh.bash import LOCAL_WORLD, Interrupts, World
from dsh.core import Disposer, Fiber, FiberState, FieldError, RegistrationConflictError, Registry, Service, ServiceKey
from dsh.loader import EntryPointItem
from dsh.session import ToolExecution

from ._declare import (
    AGENT_DEPTH_KEY,
    AGENT_ID_KEY,
    BUILTIN_DESCRIPTIONS,
    BUILTIN_DISTRIBUTION,
    BUILTIN_OWNER,
    HOME_KEY,
    PARENT_SESSION_ID_KEY,
    SESSION_ID_KEY,
    SHELL_KEY,
    TOOL_CALL_ID_KEY,
    TURN_ID_KEY,
    Contributor,
    validate,
)
from ._errors import ContributorError
from ._resolve import Call, Entry, Snapshot, sealed

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import Future

DEFAULT_RESOLVE_TIMEOUT = 1.0
"""Seconds each contributor's ``resolve()`` may take before its call fails (``resolve_timeout``)."""

MAX_RESOLVE_TIMEOUT = threading.TIMEOUT_MAX
"""The longest ``resolve_timeout``: the longest wait a thread lock accepts (about 292 years on Linux)."""


def check_resolve_timeout(seconds: float) -> None:
    """Raise :class:`FieldError` for a ``resolve_timeout`` that is not a positive number of seconds
    a wait can take (``.inf`` included: every blocking collect would fail with an OverflowError)."""
    if not seconds > 0:
        raise FieldError("resolve_timeout", "must be greater than 0")
    if not seconds <= MAX_RESOLVE_TIMEOUT:
        raise FieldError(
            "resolve_timeout",
            f"must be a finite number of seconds up to {MAX_RESOLVE_TIMEOUT:.0f}, not {seconds!r}",
        )


class VariableInfo(NamedTuple):
    """One row of the catalogue: a key, its description and who owns it (an immutable ``NamedTuple``)."""

    key: str
    description: str
    owner: str
    distribution: str | None
    version: str | None
    builtin: bool
    lost: tuple[str, ...] = ()
    """Contributors that declared this key too and were refused (``name (dist 1.0)``), the owner
    having it first: what ``dsh env`` shows as who lost."""


class Reach(NamedTuple):
    """Whether the current executor's child gets a key (``passes``; None when each call decides) and ``why``."""

    passes: bool | None
    why: str


class _State:
    __slots__ = ("_lock", "_ordered", "entries", "home", "lost", "optional", "owners", "timeout", "world")

    def __init__(
        self, home: str, timeout: float, world: Callable[[], World] | None, optional: frozenset[str] = frozenset()
    ) -> None:
        self.home = home
        self.timeout = timeout
        self.optional = optional
        self.world = world
        self.entries: Registry[Entry] = Registry("bash_env contributor")
        """The contributors by name."""
        self.owners: Registry[Entry] = Registry("managed key")
        """Per declared ``DSH_*`` key, the contributor that owns it."""
        # Per key, the contributors refused it (by name: who, and the fiber whose load failed).
        # Kept outside any effect, as the failing registration rolls its own back; a loser's
        # record counts while its fiber is not disposed (uninstalled, or loaded again).
        self.lost: dict[str, dict[str, tuple[str, Fiber | None]]] = {}
        self._ordered: tuple[Entry, ...] | None = ()
        self._lock = threading.Lock()

    def reorder(self) -> None:
        """Called after each change of ``entries``: sorted again at the next collect, not now.

        A boot registers every contributor in turn, and sorting after each was quadratic in
        their number.
        """
        with self._lock:  # never while a collect on another thread stores an order it just made
            self._ordered = None

    @property
    def ordered(self) -> tuple[Entry, ...]:
        """The entries in name order (the order of a snapshot)."""
        ordered = self._ordered
        if ordered is None:
            with self._lock:
                ordered = self._ordered
                if ordered is None:
                    ordered = self._ordered = tuple(self.entries.values())  # name order
        return ordered


class BashEnvRegistry(Service):
    """The ``bash_env`` service: who owns which ``DSH_*`` key, and per-call snapshots.

    Obtained through ``ctx.get(BASH_ENV)``, the registry is bound to the caller, so what
    a plugin registers is an effect of that plugin's fiber.
    """

    def __init__(
        self,
        home: str | Path,
        *,
        resolve_timeout: float = DEFAULT_RESOLVE_TIMEOUT,
        version: str | None = None,
        world: Callable[[], World] | None = None,
        optional: Collection[str] = (),
    ) -> None:
        check_resolve_timeout(resolve_timeout)
        self._state = _State(str(Path(home).absolute()), resolve_timeout, world, frozenset(optional))
        self._version = version
        """dsh-bash-env's version as discovery found it (None: ask importlib.metadata when listing)."""

    @property
    def resolve_timeout(self) -> float:
        """Seconds each contributor's ``resolve()`` may take."""
        return self._state.timeout

    @property
    def home(self) -> str:
        """The absolute harness home; a snapshot carries it as ``DSH_HOME`` where the child can read it."""
        return self._state.home

    def world(self) -> World:
        """The world of the current executor, asked at each call (local when nobody says otherwise)."""
        world = self._state.world
        return LOCAL_WORLD if world is None else world()

    def home_in(self, world: World, cwd: str | None = None) -> tuple[str | None, str | None]:
        """``DSH_HOME`` as a child of ``world`` gets it (None when it gets none), and why it gets none.

        The world's own home when it names one (a remote host's), else the harness's where the
        child can read it at that path.
        """
        if world.home is not None:
            return world.home, None
        why = world.why_not(self._state.home, cwd)
        return (self._state.home if why is None else None), why

    def register(
        self, contributor: Contributor, *, origin: EntryPointItem | None = None, builtin: bool = False
    ) -> Disposer:
        """Add a contributor; raise :class:`ContributorError` naming it (and the key) when malformed.

        Returns an idempotent disposer; unloading the calling plugin disposes it too. Without an
        ``origin``, the contributor is attributed to the distribution of the calling plugin's entry
        point (``dsh env`` shows it; errors name it).
        """
        name, descriptions, resolve = validate(contributor, builtin=builtin)
        state = self._state
        if origin is None and not builtin:
            origin = self._caller_origin()
        claimant = self.claimant()

        def setup() -> Disposer:
            # Both tables are dsh-core registries, the one owner of "a key is held once": the name and
            # every declared key are claimed in this one effect, so unloading removes them all.
            entry = Entry(name, contributor, resolve, descriptions, origin, builtin)
            claims: builtins.list[Disposer] = []
            try:
                claims.append(state.entries.claim(name, entry, claimant))
                for key in descriptions:
                    claims.append(state.owners.claim(key, entry, claimant))
            except RegistrationConflictError as exc:
                for release in reversed(claims):
                    release()
                raise self._refused(entry, exc.key, exc.kind == state.entries.kind) from None
            for key in descriptions:
                state.lost.get(key, {}).pop(name, None)  # it has the key now
            state.reorder()

            def remove() -> None:
                for release in reversed(claims):
                    release()
                state.reorder()
                entry.close()

            return remove

        return self.effect(setup, label=f"bash_env contributor {name}")

    def _refused(self, entry: Entry, key: str, by_name: bool) -> ContributorError:
        """The error for a contributor whose name or one of whose keys another holds (a loser is recorded)."""
        if by_name:
            return ContributorError(f"a contributor named '{key}' is already registered", contributor=key)
        state = self._state
        held = state.owners.get(key)
        assert held is not None
        fiber = None if self.caller is None else self.caller.fiber
        state.lost.setdefault(key, {})[entry.name] = (entry.who(), fiber)
        rule = " (the first installed keeps a key)" if held.origin and entry.origin else ""
        return ContributorError(
            f"key '{key}' is already owned by contributor {held.who()}; "
            f"contributor {entry.who()} cannot declare it{rule}",
            contributor=entry.name,
            key=key,
        )

    def _caller_origin(self) -> EntryPointItem | None:
        """The entry point the registering plugin (or the nearest plugin above it) was loaded from:
        a contributor registered at run time is its plugin's distribution's."""
        fiber = None if self.caller is None else self.caller.fiber
        while fiber is not None:
            if isinstance(fiber.origin, EntryPointItem):
                return fiber.origin
            fiber = fiber.parent
        return None

    def collect(self, execution: ToolExecution) -> Snapshot:
        """A new immutable snapshot for one call: built-ins, then each contributor in name order.

        Blocks the calling thread until every contributor answered or the call's deadline passed (a
        signal caught by an active :class:`dsh.bash.Interrupts` breaks the wait); inside an event
        loop use :meth:`collect_async`.
        """
        state = self._state
        out = self._builtins(execution)
        with Call(state.ordered, execution, state.timeout, out, state.optional) as call:
            while pending := call.pending():
                from concurrent.futures import FIRST_EXCEPTION, wait  # loaded already: a future exists

                with Interrupts.waiting():
                    wait(pending, call.left(), FIRST_EXCEPTION)
        return sealed(out, call.warnings)

    async def collect_async(self, execution: ToolExecution) -> Snapshot:
        """:meth:`collect` without blocking the event loop: other calls go on while a contributor resolves."""
        import asyncio

        state = self._state
        out = self._builtins(execution)
        with Call(state.ordered, execution, state.timeout, out, state.optional) as call:
            while pending := call.pending():
                loop = asyncio.get_running_loop()
                # Only ever given a plain result: no exception is left unretrieved on the loop.
                waiter: asyncio.Future[None] = loop.create_future()
                wake = _waker(loop, waiter)
                for future in pending:
                    future.add_done_callback(wake)
                try:
                    await asyncio.wait((waiter,), timeout=call.left())
                finally:
                    waiter.cancel()  # stop waiting; a resolve itself cannot be stopped
        return sealed(out, call.warnings)

    def _builtins(self, execution: ToolExecution) -> dict[str, str]:
        state = self._state
        world = LOCAL_WORLD if state.world is None else state.world()
        if world is LOCAL_WORLD:  # the common case, without a path walk
            out = {HOME_KEY: state.home, SHELL_KEY: "1"}
        else:
            session = execution.session
            home, _ = self.home_in(world, None if session is None else session.cwd)
            out = {HOME_KEY: home, SHELL_KEY: "1"} if home is not None else {SHELL_KEY: "1"}
        agent = execution.agent
        if agent is not None:
            header = agent.header
            out[SESSION_ID_KEY] = header.id
            out[TOOL_CALL_ID_KEY] = execution.call_id
            if execution.turn_id:
                out[TURN_ID_KEY] = execution.turn_id
            # Lineage: every agent has a session of its own, so its id is that session's.
            out[AGENT_ID_KEY] = header.id
            out[AGENT_DEPTH_KEY] = str(header.delegation_depth)
            parent = header.lineage_parent
            if parent is not None:
                out[PARENT_SESSION_ID_KEY] = parent
        trace = execution.trace
        if trace is not None:
            out.update(trace.carrier())
        return out

    def reach(self, execution: ToolExecution | None = None) -> dict[str, Reach]:
        """Per declared key, whether a child of the current executor's world gets it, and why (``dsh env``).

        ``execution`` (a session's) makes the answer exact for that session; without it a fact that
        depends on the session says so. A contributor says it for its own keys with an optional
        ``explain(execution, world) -> Mapping[str, Reach]``; one without passes what it resolves. A
        contributor whose last resolve in this process failed does not pass, and the failure is the why.
        """
        world = self.world()
        session = None if execution is None else execution.session
        home, why = self.home_in(world, None if session is None else session.cwd)
        out: dict[str, Reach] = {}
        if home is None:
            out[HOME_KEY] = Reach(False, why or "")
        elif world.home is not None:
            out[HOME_KEY] = Reach(True, f"{world.label} names its own home, {world.home}")
        else:
            out[HOME_KEY] = Reach(True, f"readable at that path in {world.label}")
        for key in BUILTIN_DESCRIPTIONS:
            out.setdefault(key, Reach(True, "an identity fact: true in every world"))
        for entry in self._state.ordered:
            if entry.last_failure is not None:  # what it says of itself matters less than how its last call went
                out.update(
                    {key: Reach(False, f"its last call failed: {entry.last_failure}") for key in entry.descriptions}
                )
                continue
            explain = getattr(entry.contributor, "explain", None)
            if callable(explain):
                try:
                    out.update(explain(execution, world))
                    continue
                except Exception as exc:  # a diagnostic: say so, never lose the catalogue
                    reason = f"its explain() raised {type(exc).__name__}: {exc}"
                    out.update({key: Reach(None, reason) for key in entry.descriptions})
                    continue
            for key in entry.descriptions:
                out.setdefault(key, Reach(True, f"passed as contributor '{entry.name}' resolves it"))
        return out

    def list(self) -> builtins.list[VariableInfo]:
        """Every declared key (built-ins included, marked), sorted by key, without running resolvers."""
        version = self._version or _own_version()
        rows = [
            VariableInfo(key, desc, BUILTIN_OWNER, BUILTIN_DISTRIBUTION, version, True)
            for key, desc in BUILTIN_DESCRIPTIONS.items()
        ]
        for entry in self._state.ordered:
            dist = entry.origin.distribution if entry.origin else (BUILTIN_DISTRIBUTION if entry.builtin else None)
            ver = entry.origin.version if entry.origin else (version if entry.builtin else None)
            rows.extend(
                VariableInfo(key, desc, entry.name, dist, ver, entry.builtin, self._lost(key))
                for key, desc in entry.descriptions.items()
            )
        return sorted(rows, key=lambda r: r.key)

    def _lost(self, key: str) -> tuple[str, ...]:
        refused = self._state.lost.get(key, {})
        return tuple(who for who, fiber in refused.values() if fiber is None or fiber.state is not FiberState.DISPOSED)

    def contributors(self) -> builtins.list[str]:
        """Names of the registered contributors, sorted."""
        return list(self._state.entries)


def _waker(loop: "asyncio.AbstractEventLoop", waiter: "asyncio.Future[None]") -> "Callable[[Future[Any]], None]":
    """A done-callback for a resolve's future that wakes the waiting loop (a closed loop has nobody waiting)."""

    def settle() -> None:
        if not waiter.done():
            waiter.set_result(None)

    def wake(_: "Future[Any]") -> None:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle)

    return wake


def _own_version() -> str | None:
    import importlib.metadata as md  # only when discovery did not say (bash-env loaded as module:attr)

    try:
        return md.version(BUILTIN_DISTRIBUTION)
    except md.PackageNotFoundError:
        return None


BASH_ENV: ServiceKey[BashEnvRegistry] = ServiceKey("bash_env")
"""The managed-environment registry service."""
