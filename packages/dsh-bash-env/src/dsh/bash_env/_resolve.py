"""Running contributors' resolves under their deadline, and checking what they return.

The built-ins (the persistence translator) resolve inline on the caller's thread. Every other
contributor has a bounded pool of its own (:class:`~dsh.bash_env._pool.DaemonPool`, at most
:data:`THREADS_PER_CONTRIBUTOR` threads, started when first needed): a call hands each of them its
resolve at once, so they run in parallel, and then takes their outcomes in name order, each by the
call's deadline (``resolve_timeout`` from the call's start). A contributor stuck in its resolves
holds only its own threads: the others never wait for it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Union

from dsh.core import describe
from dsh.loader import EntryPointItem
from dsh.session import ReadOnlyDict, ToolExecution

from ._declare import MAX_SNAPSHOT_BYTES, MAX_VALUE_BYTES, Contributor
from ._errors import CollectionError

if TYPE_CHECKING:  # imported when a third-party contributor first resolves: a cold command has none
    from concurrent.futures import Future

    from ._pool import DaemonPool

THREADS_PER_CONTRIBUTOR = 8
"""Resolves of one contributor that may run at once; more wait for one of its threads to be free.

Once all of them run resolves that passed their deadline (the contributor hangs), its calls fail at
once instead of waiting: threads of a hanging contributor stay bounded, and it never holds up another.
"""

Outcome = Union[Mapping[str, str], CollectionError]  # noqa: UP007 (Mapping | ... would need typing at run time)
"""What one resolve gave: its checked values, or the error its call fails with."""


class Entry:
    """A registered contributor, checked, with the threads its resolves run on (internal)."""

    __slots__ = (
        "__weakref__",
        "_lock",
        "_pool",
        "_running",
        "builtin",
        "contributor",
        "descriptions",
        "keys",
        "last_failure",
        "name",
        "origin",
        "resolve",
    )

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
        self._lock = threading.Lock()
        self._pool: DaemonPool | None = None
        self._running: list[float] = []  # the call deadline of each resolve running now
        self.last_failure: str | None = None
        """Why this contributor's last resolve taken into a call failed; None once one succeeds (``dsh env``)."""

    def who(self) -> str:
        """The contributor as errors name it: its name and, when it came from one, its distribution."""
        origin = self.origin
        return f"'{self.name}' ({origin.distribution} {origin.version})" if origin else f"'{self.name}'"

    def submit(self, execution: ToolExecution, deadline: float) -> Future[Mapping[str, str]]:
        """Start this contributor's resolve for a call that ends at ``deadline`` (monotonic)."""
        with self._lock:
            pool = self._pool
            if pool is None:
                from ._pool import DaemonPool

                pool = self._pool = DaemonPool(THREADS_PER_CONTRIBUTOR, f"dsh-resolve-{self.name}")
                # A registry dropped without unregistering (tests, a plugin's own) ends its threads too.
                weakref.finalize(self, pool.shutdown, False)
        return pool.submit(_tracked, self, execution, deadline)

    def stuck(self, now: float) -> int:
        """How many of its resolves still run although their call's deadline passed."""
        with self._lock:
            return sum(deadline <= now for deadline in self._running)

    def close(self) -> None:
        """The contributor was removed: its idle threads end, and running ones when their resolve returns."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)


def _tracked(entry: Entry, execution: ToolExecution, deadline: float) -> Mapping[str, str]:
    """:func:`resolved` on one of the contributor's threads, counted as running until it returns.

    A failure is raised, so that it is set on the future: a call waiting for all its futures at once
    wakes at the first one instead of after the others.
    """
    with entry._lock:
        entry._running.append(deadline)
    try:
        outcome = resolved(entry, execution)
    finally:
        with entry._lock:
            entry._running.remove(deadline)
    if isinstance(outcome, CollectionError):
        raise outcome
    return outcome


def resolved(entry: Entry, execution: ToolExecution) -> Outcome:
    """Run ``entry``'s ``resolve()``; its checked values, or the error its call fails with (never raises)."""
    values: dict[str, str] = {}
    try:
        # The result is read here too, under the deadline: a mapping whose items() sleeps or
        # raises must not run on the caller's thread (or the server's event loop).
        check(entry, entry.resolve(execution), values)
    except CollectionError as exc:
        return exc
    except BaseException as exc:
        # Even SystemExit or KeyboardInterrupt: on a contributor's thread none can come from the
        # terminal, and a built-in's is the harness's own bug: each is the contributor's failure.
        return CollectionError(
            f"contributor {entry.who()} raised {type(exc).__name__} while resolving{_detail(exc)}",
            contributor=entry.name,
        )
    return values


def _detail(exc: BaseException) -> str:
    """``": message"`` of ``exc`` (empty for none), from dsh-core's one formatter, which never raises:
    an exception whose ``str()`` itself raises must not turn its contributor's failure into ours."""
    return describe(exc)[len(type(exc).__name__) :]


class Snapshot(ReadOnlyDict):
    """One call's managed variables (a read-only dict), and the warnings of optional contributors
    that failed for it (their keys are absent). A copy or a pickle is a plain ``ReadOnlyDict``."""

    __slots__ = ("warnings",)

    def __init__(self, values: dict[str, str], warnings: tuple[str, ...] = ()) -> None:
        super().__init__(values)
        self.warnings = warnings
        """One line per optional contributor that failed for this call, naming it."""


class Call:
    """The resolves of one collect: the third-party ones started together, outcomes taken in name order.

    ``with Call(...) as call:`` then, while :meth:`pending` names futures, wait up to :meth:`left`
    seconds for all of them or the first to fail. Leaving the block cancels every resolve not started yet (nobody would
    read its value); one already running goes on and counts against its contributor only once its
    deadline passed.
    """

    __slots__ = ("_at", "deadline", "futures", "optional", "out", "outcomes", "timeout", "warnings")

    def __init__(
        self,
        entries: Sequence[Entry],
        execution: ToolExecution,
        timeout: float,
        out: dict[str, str],
        optional: frozenset[str] = frozenset(),
    ) -> None:
        now = time.monotonic()
        self.optional = optional
        self.warnings: list[str] = []
        started = []
        for entry in entries:
            stuck = 0 if entry.builtin else entry.stuck(now)
            if stuck >= THREADS_PER_CONTRIBUTOR:  # before anything starts: the call fails anyway
                error = CollectionError(
                    f"contributor {entry.who()} is still running {stuck} resolve() calls that passed their "
                    f"{timeout:g} s deadline; this call fails without starting another",
                    contributor=entry.name,
                )
                entry.last_failure = str(error)
                self._failed(error)
                continue  # an optional one: its keys are absent, the call goes on
            started.append(entry)
        entries = started
        self.timeout = timeout
        self.deadline = now + timeout
        self.out = out
        self._at = 0  # the first outcome not taken yet
        self.futures = {e.name: e.submit(execution, self.deadline) for e in entries if not e.builtin}
        # In name order, each built-in with its outcome (the harness's own, inline while the others
        # run), each other contributor with None: its outcome is its future's.
        self.outcomes = [(e, resolved(e, execution) if e.builtin else None) for e in entries]

    def __enter__(self) -> Call:
        return self

    def __exit__(self, *exc: object) -> None:
        for future in self.futures.values():
            future.cancel()  # only one not started yet: a running resolve cannot be stopped

    def left(self) -> float:
        """Seconds until the call's deadline (0 once passed)."""
        return max(0.0, self.deadline - time.monotonic())

    def pending(self) -> list[Future[Mapping[str, str]]]:
        """Take the outcomes that are in, in name order, into the snapshot; the futures still to wait
        for (none: all in). Raises the first failure in name order, or once the deadline passed the
        deadline error of the first resolve in name order not in yet."""
        outcomes = self.outcomes
        while self._at < len(outcomes):
            entry, outcome = outcomes[self._at]
            if outcome is None:
                future = self.futures[entry.name]
                if not future.done():
                    if time.monotonic() < self.deadline:
                        return self._before_a_failure()
                    outcome = self._overran(entry, future)
                else:
                    outcome = _settled(entry, future)
            self._at += 1
            if isinstance(outcome, CollectionError):
                entry.last_failure = str(outcome)
                self._failed(outcome)
            else:
                entry.last_failure = None
                self.out.update(outcome)
        return []

    def _failed(self, error: CollectionError) -> None:
        """Raise ``error``, unless its contributor is ``optional``: then its keys are absent, one warning says why."""
        if error.contributor not in self.optional:
            raise error
        self.warnings.append(f"{error} (optional in the bash-env config: its keys are left out of this call)")

    def _before_a_failure(self) -> list[Future[Mapping[str, str]]]:
        """The futures not done from the first not taken on, up to the first that failed (past it
        none matters: the call fails with that one or an earlier one)."""
        waiting = []
        for entry, outcome in self.outcomes[self._at :]:
            if outcome is None:
                future = self.futures[entry.name]
                if not future.done():
                    waiting.append(future)
                    continue
                outcome = _settled(entry, future)
            if isinstance(outcome, CollectionError) and entry.name not in self.optional:
                break
        return waiting

    def _overran(self, entry: Entry, future: Future[Mapping[str, str]]) -> CollectionError:
        if future.cancel():  # it never started: all its threads were busy with other calls
            message = (
                f"contributor {entry.who()} did not start resolving within its {self.timeout:g} s deadline: "
                f"its {THREADS_PER_CONTRIBUTOR} threads were busy with other calls' resolves "
                "(bash-env config resolve_timeout)"
            )
        else:
            message = (
                f"contributor {entry.who()} did not resolve within its {self.timeout:g} s deadline "
                "(bash-env config resolve_timeout)"
            )
        return CollectionError(message, contributor=entry.name)


def _settled(entry: Entry, future: Future[Mapping[str, str]]) -> Outcome:
    """A finished future's outcome; anything but a :class:`CollectionError` is a bug of bash-env's own."""
    exc = future.exception()
    if exc is None:
        return future.result()
    if isinstance(exc, CollectionError):
        return exc
    return CollectionError(
        f"dsh-bash-env failed while running contributor {entry.who()}'s resolve: "
        f"{type(exc).__name__}{_detail(exc)} (a bug in dsh-bash-env; please report it)",
        contributor=entry.name,
    )


def sealed(out: dict[str, str], warnings: Sequence[str] = ()) -> Snapshot:
    """The snapshot, read-only, once its total size is checked."""
    total = sum(map(len, out)) + sum(map(len, out.values()))
    if total > MAX_SNAPSHOT_BYTES:
        largest = max(out, key=lambda k: len(out[k]))
        raise CollectionError(
            f"the managed variables of this call add up to {total} characters; the maximum is "
            f"{MAX_SNAPSHOT_BYTES} (largest: '{largest}')",
            key=largest,
        )
    return Snapshot(out, tuple(warnings))


def _a(value: object) -> str:
    """What a contributor returned, as a sentence says it: ``None``, ``an int``, ``a list``."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def check(entry: Entry, values: object, out: dict[str, str]) -> None:
    """Copy ``values`` into ``out``, refusing a non-mapping, an undeclared key or a bad value."""
    if type(values) is not dict and not isinstance(values, Mapping):
        raise CollectionError(
            f"contributor {entry.who()} returned {_a(values)} from resolve(), not a mapping of keys to strings",
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
                f"contributor {entry.who()} returned {_a(value)} for key '{key}', not a string",
                contributor=entry.name,
                key=key,
            )
        if "\0" in value:
            raise CollectionError(
                f"contributor {entry.who()} returned a NUL character in key '{key}'",
                contributor=entry.name,
                key=key,
            )
        size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogateescape"))
        if size > MAX_VALUE_BYTES:
            raise CollectionError(
                f"contributor {entry.who()} returned {size} bytes for key '{key}'; "
                f"the maximum is {MAX_VALUE_BYTES} bytes",
                contributor=entry.name,
                key=key,
            )
        out[key] = value
