"""Running contributors' resolves: each under a deadline, on a worker thread, its output checked.

No ``concurrent.futures``: a :class:`Pending` is the one slot a resolve's outcome lands in, waited
for by a blocking :meth:`~dsh.bash_env.BashEnvRegistry.collect` (a thread event, interruptible by
:class:`dsh.bash.Interrupts`) or, under an event loop, by ``collect_async``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from dsh.loader import EntryPointItem
from dsh.session import ToolExecution

from ._declare import MAX_SNAPSHOT_BYTES, MAX_VALUE_BYTES, Contributor
from ._errors import CollectionError

MAX_OVERDUE = 4
"""Resolves of one contributor that may still run past their deadline before its calls fail at once."""


class Entry:
    """A registered contributor, checked (internal: a plain class, cheap to define)."""

    __slots__ = ("builtin", "contributor", "descriptions", "keys", "name", "origin", "resolve")

    def __init__(
        self,
        name: str,
        contributor: Contributor,
        resolve: Callable[[ToolExecution], Mapping[str, str]],
        descriptions: Mapping[str, str],
        origin: EntryPointItem | None,
        builtin: bool,
    ) -> None:
        self.name = name
        self.contributor = contributor
        self.resolve = resolve
        self.descriptions = descriptions
        self.keys = frozenset(descriptions)
        self.origin = origin
        self.builtin = builtin

    def who(self) -> str:
        """The contributor as errors name it: its name and, when it came from one, its distribution."""
        origin = self.origin
        return f"'{self.name}' ({origin.distribution} {origin.version})" if origin else f"'{self.name}'"


_SETTLED = threading.Event()
_SETTLED.set()  # never cleared: shared by every outcome known when it was made
_SETTLED_LOCK = threading.Lock()


class Pending:
    """One resolve's outcome (checked values or a :class:`CollectionError`), set once, from any thread."""

    __slots__ = ("_callbacks", "_done", "_error", "_lock", "_values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._values: Mapping[str, str] | None = None
        self._error: CollectionError | None = None
        self._callbacks: list[Callable[[Pending], None]] = []

    @classmethod
    def settled(cls, values: Mapping[str, str] | None, error: CollectionError | None) -> Pending:
        """An outcome known at once (a built-in resolved inline): no lock or event of its own to build."""
        made = cls.__new__(cls)
        made._lock, made._done, made._callbacks = _SETTLED_LOCK, _SETTLED, []
        made._values, made._error = values, error
        return made

    def done(self) -> bool:
        """True once the outcome is set."""
        return self._done.is_set()

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the outcome; True when it is set."""
        return self._done.wait(timeout)

    def result(self) -> Mapping[str, str]:
        """The checked values; raises the contributor's :class:`CollectionError`."""
        if self._error is not None:
            raise self._error
        assert self._values is not None, "result() before the resolve ended"
        return self._values

    def settle(self, values: Mapping[str, str] | None = None, error: CollectionError | None = None) -> None:
        """Set the outcome and run the callbacks (on this thread)."""
        with self._lock:
            self._values, self._error = values, error
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback: Callable[[Pending], None]) -> None:
        """Call ``callback(self)`` once the outcome is set (at once if it is)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)


class Resolves:
    """Starts resolves and keeps those that passed their deadline, per contributor."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        # Resolves that passed their deadline and still run (a thread cannot be killed). Other
        # calls of that contributor still get their own resolve, up to MAX_OVERDUE stuck ones;
        # past that they fail at once instead of piling up a thread per call.
        self.overdue: dict[str, set[Pending]] = {}

    def start(self, entry: Entry, execution: ToolExecution) -> Pending:
        """Run one ``resolve()``: built-ins inline, others on a worker; its outcome (never a raise) lands in a slot."""
        stuck = self.overdue.get(entry.name, ())
        if len(stuck) >= MAX_OVERDUE:
            raise CollectionError(
                f"contributor {entry.who()} is still running {len(stuck)} resolve() calls that passed their "
                f"{self.timeout:g} s deadline; this call fails without starting another",
                contributor=entry.name,
            )

        def run() -> tuple[Mapping[str, str] | None, CollectionError | None]:
            try:
                # The result is read here too, under the deadline: a mapping whose items() sleeps or
                # raises must not run on the caller's thread (or the server's event loop).
                checked: dict[str, str] = {}
                check(entry, entry.resolve(execution), checked)
            except CollectionError as exc:
                return None, exc
            except BaseException as exc:
                # Even SystemExit or KeyboardInterrupt: on this thread none can come from the
                # terminal, so each is the contributor's failure, reported as such.
                detail = f": {exc}" if str(exc) else ""
                return None, CollectionError(
                    f"contributor {entry.who()} raised {type(exc).__name__} while resolving{detail}"
                )
            return checked, None

        if entry.builtin:
            return Pending.settled(*run())  # the harness's own contributors: no thread hop, no event
        pending = Pending()
        from ._workers import WORKERS  # threads only when a contributor of another package runs

        WORKERS.submit(lambda: pending.settle(*run()))
        return pending

    def started(self, entries: Sequence[Entry], execution: ToolExecution) -> Started:
        """Start every entry's resolve at once (each with its own deadline); the caller waits in order.

        Resolves of other packages run on worker threads: started together, their thread hops
        overlap instead of adding up. Whatever the caller leaves unwaited (it stopped at a failing
        contributor) and still runs is kept as stuck, so a contributor that hangs stays bounded.
        """
        return Started(self, entries, execution)

    def _keep(self, entry: Entry, pending: Pending) -> None:
        """Count ``pending`` as stuck for ``entry`` until it ends."""
        stuck = self.overdue.setdefault(entry.name, set())
        stuck.add(pending)
        pending.add_done_callback(stuck.discard)

    def overran(self, entry: Entry, pending: Pending) -> CollectionError:
        """Keep ``pending`` as stuck until it ends; the error this call fails with."""
        self._keep(entry, pending)
        return CollectionError(
            f"contributor {entry.who()} did not resolve within its {self.timeout:g} s deadline "
            "(bash-env config resolve_timeout)"
        )


class Started:
    """The resolves of one call, started together: ``with resolves.started(...) as started:``."""

    __slots__ = ("_entries", "_execution", "_resolves", "_started")

    def __init__(self, resolves: Resolves, entries: Sequence[Entry], execution: ToolExecution) -> None:
        self._resolves, self._entries, self._execution = resolves, entries, execution
        self._started: list[tuple[Entry, Pending, float]] = []

    def __enter__(self) -> list[tuple[Entry, Pending, float]]:
        resolves, started = self._resolves, self._started
        # One deadline for all: they start together (the built-ins inline, in microseconds).
        deadline = time.monotonic() + resolves.timeout
        try:
            for entry in self._entries:
                started.append((entry, resolves.start(entry, self._execution), deadline))
        except BaseException:
            self.__exit__()
            raise
        return started

    def __exit__(self, *exc: object) -> None:
        for entry, pending, _ in self._started:
            if not pending.done():
                self._resolves._keep(entry, pending)


def sealed(out: dict[str, str]) -> Mapping[str, str]:
    """The snapshot, read-only, once its total size is checked."""
    total = sum(len(k) + len(v) for k, v in out.items())
    if total > MAX_SNAPSHOT_BYTES:
        largest = max(out, key=lambda k: len(out[k]))
        raise CollectionError(
            f"the managed variables of this call add up to {total} characters; the maximum is "
            f"{MAX_SNAPSHOT_BYTES} (largest: '{largest}')",
            key=largest,
        )
    return MappingProxyType(out)


def check(entry: Entry, values: object, out: dict[str, str]) -> None:
    """Copy ``values`` into ``out``, refusing a non-mapping, an undeclared key or a bad value."""
    if not isinstance(values, Mapping):
        raise CollectionError(
            f"contributor {entry.who()} returned {type(values).__name__} from resolve(), "
            "not a mapping of keys to strings",
            contributor=entry.name,
        )
    keys = entry.keys
    for key, value in values.items():
        if key not in keys:
            raise CollectionError(
                f"contributor {entry.who()} returned undeclared key '{key}'", contributor=entry.name, key=key
            )
        if type(value) is not str:
            raise CollectionError(
                f"contributor {entry.who()} returned a {type(value).__name__} for key '{key}', not a string",
                contributor=entry.name,
                key=key,
            )
        if "\0" in value:
            raise CollectionError(
                f"contributor {entry.who()} returned a NUL character in key '{key}'",
                contributor=entry.name,
                key=key,
            )
        size = len(value.encode("utf-8", "surrogateescape"))
        if size > MAX_VALUE_BYTES:
            raise CollectionError(
                f"contributor {entry.who()} returned {size} bytes for key '{key}'; "
                f"the maximum is {MAX_VALUE_BYTES} bytes",
                contributor=entry.name,
                key=key,
            )
        out[key] = value
