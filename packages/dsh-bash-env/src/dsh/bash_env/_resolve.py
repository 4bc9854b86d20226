"""Running contributors' resolves: each under its own deadline, third-party ones off the caller's thread.

A call's built-ins resolve inline. Its third-party resolves go to one worker as one :class:`Batch`,
run there in name order, so a call costs one thread hop however many contributors it has. A resolve
still running after :data:`PATIENCE` is a slow one: the resolves behind it then start at once, each on
a worker of its own, so slow contributors overlap as they did before batching. No
``concurrent.futures``: the worker wakes a blocking :meth:`~dsh.bash_env.BashEnvRegistry.collect`
through one plain lock (a wait :class:`dsh.bash.Interrupts` can break) and, under an event loop,
``collect_async`` through the loop's ``call_soon_threadsafe``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from dsh.core import ReadOnlyDict, describe
from dsh.loader import EntryPointItem
from dsh.session import ToolExecution

from ._declare import MAX_SNAPSHOT_BYTES, MAX_VALUE_BYTES, Contributor
from ._errors import CollectionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._workers import _Workers

MAX_OVERDUE = 4
"""Resolves of one contributor that may still run past their deadline before its calls fail at once.

Only resolves that really passed their deadline count: one a call left running when it stopped for
another reason (another contributor failed, the caller was cancelled) blames nobody while in time.
"""

PATIENCE = 0.005
"""Seconds a batch's running resolve may take before the resolves behind it start apart (in parallel).

A contributor that answers from memory takes microseconds; one that takes milliseconds does I/O, and
the ones behind it should not wait for it: with three that each take 100 ms, a call takes about
100 ms, not 300.
"""


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


def resolved(entry: Entry, execution: ToolExecution, out: dict[str, str]) -> CollectionError | None:
    """Run ``entry``'s ``resolve()`` and copy its checked values into ``out``; the error its call fails
    with, if any (never raises). On an error ``out`` may hold part of the values: the call fails."""
    try:
        # The result is read here too, under the deadline: a mapping whose items() sleeps or
        # raises must not run on the caller's thread (or the server's event loop).
        check(entry, entry.resolve(execution), out)
    except CollectionError as exc:
        return exc
    except BaseException as exc:
        # Even SystemExit or KeyboardInterrupt: on a worker none can come from the terminal, and
        # a built-in's is the harness's own bug: each is the contributor's failure, named as such.
        return CollectionError(
            f"contributor {entry.who()} raised {type(exc).__name__} while resolving{_detail(exc)}",
            contributor=entry.name,
        )
    return None


def _detail(exc: BaseException) -> str:
    """``": message"`` of ``exc`` (empty for none), from dsh-core's one formatter, which never raises:
    an exception whose ``str()`` itself raises must not turn its contributor's failure into ours."""
    return describe(exc)[len(type(exc).__name__) :]


class Resolves:
    """Runs the resolves of each call and tracks, per contributor, those that still run unwatched."""

    __slots__ = ("_lock", "timeout", "unwatched")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        # Per contributor, when each of its resolves still running that no call waits for started
        # (monotonic; a thread cannot be killed): one past its deadline, or one a call left behind
        # when it stopped for another reason. Only those past their deadline count: a contributor
        # with MAX_OVERDUE of them fails its calls at once instead of piling up a stuck worker per
        # call; one merely left behind blames nobody (it ends soon, or passes its deadline and counts).
        self.unwatched: dict[str, list[float]] = {}

    def call(self, entries: Sequence[Entry], execution: ToolExecution, out: dict[str, str]) -> Call:
        """Resolve one call's contributors into ``out``: ``with resolves.call(entries, execution, out) as call:``."""
        return Call(self, entries, execution, out)

    def keep(self, entry: Entry, since: float) -> None:
        """One of ``entry``'s resolves, started at ``since``, runs on with no call waiting for it."""
        with self._lock:
            self.unwatched.setdefault(entry.name, []).append(since)

    def release(self, entry: Entry, since: float) -> None:
        """The unwatched resolve of ``entry`` started at ``since`` ended."""
        with self._lock:
            starts = self.unwatched[entry.name]
            starts.remove(since)
            if not starts:
                del self.unwatched[entry.name]

    def overdue(self, entry: Entry) -> int:
        """How many of ``entry``'s unwatched resolves passed their deadline and still run."""
        if entry.name not in self.unwatched:
            return 0
        passed = time.monotonic() - self.timeout  # a resolve started before this is overdue
        with self._lock:
            return sum(since <= passed for since in self.unwatched.get(entry.name, ()))

    def refusal(self, entry: Entry) -> CollectionError | None:
        """The error a call fails with at once when ``entry`` has too many resolves past their deadline."""
        stuck = self.overdue(entry)
        if stuck < MAX_OVERDUE:
            return None
        return CollectionError(
            f"contributor {entry.who()} is still running {stuck} resolve() calls that passed their "
            f"{self.timeout:g} s deadline; this call fails without starting another",
            contributor=entry.name,
        )

    def overran(self, entry: Entry) -> CollectionError:
        """The error a call fails with when ``entry``'s resolve passed its deadline."""
        return CollectionError(
            f"contributor {entry.who()} did not resolve within its {self.timeout:g} s deadline "
            "(bash-env config resolve_timeout)",
            contributor=entry.name,
        )


class Batch:
    """A call's third-party resolves, run one after another on one worker: one thread hop per call.

    Each resolve's deadline counts from when it started on the worker. The worker stops at the first
    failure, or once the resolves the call needs have ended, and then wakes the caller, once. A caller
    that stops waiting (a failure, a resolve past its deadline, an interrupt) abandons the batch: the
    resolve running then runs on unwatched, tracked with the time it started, and none not yet started
    ever starts (nobody would read its value).

    Values go straight into the call's snapshot (a batch started apart after a split, into a part of
    its own that :meth:`Call.check` merges in name order): once the caller is woken without a
    failure, every resolve has ended; after a failure nobody reads the snapshot again.
    """

    __slots__ = (
        "_callback",
        "_lock",
        "_wake",
        "base",
        "current",
        "entries",
        "execution",
        "failed",
        "kept",
        "needed",
        "next",
        "out",
        "resolves",
        "signalled",
        "since",
        "started",
    )

    def __init__(
        self,
        resolves: Resolves,
        entries: list[Entry],
        execution: ToolExecution,
        out: dict[str, str],
        needed: int,
        base: int = 0,
    ) -> None:
        self.resolves, self.entries, self.execution, self.out = resolves, entries, execution, out
        self.needed = needed  # resolves before a failed built-in: the call needs no outcome past them
        self.base = base  # the place of its first resolve among the call's, in name order
        self.failed: tuple[int, CollectionError] | None = None  # the first failure, and its resolve
        self._lock = threading.Lock()
        self._wake = threading.Lock()
        self._wake.acquire()  # released by the worker, once: the cheapest cross-thread wake-up measured
        self._callback: Callable[[], None] | None = None
        self.signalled = False  # the caller was (or is being) woken
        self.next = 0  # the next resolve to start
        self.current = -1  # the resolve running now, if any, and since when (monotonic)
        self.since = 0.0
        self.kept = False  # the current resolve runs unwatched (its caller stopped waiting)
        self.started = False

    def start(self) -> None:
        """Hand the batch to a worker, once: right before the caller blocks, so the woken worker finds
        the GIL free rather than waiting for it (side by side, within this machine's noise)."""
        if not self.started:
            self.started = True
            _workers().submit(self.run)

    def run(self) -> Callable[[], None] | None:
        """The worker's side: resolve in order; return the final wake-up, for after the worker is idle again.

        Never raises: a bug here is reported as the call's failure, and the caller is woken and the
        batch's count released whatever happened, so nothing strands a waiting call or a count.
        """
        entries, resolves, execution, out = self.entries, self.resolves, self.execution, self.out
        acquire, release = self._lock.acquire, self._lock.release  # half the cost of `with` here
        monotonic = time.monotonic
        stop = min(self.needed, len(entries))  # past these the call needs no outcome (a built-in failed)
        k, entry, error = -1, entries[0], None
        try:
            while True:
                acquire()  # one lock per resolve: record the one that ended, start the next
                try:
                    if self.kept:  # its caller stopped waiting while it ran
                        self.kept = False
                        resolves.release(entry, self.since)
                    if error is not None:  # nothing after a failure matters to the call
                        self.failed = (k, error)
                        k = stop
                    else:
                        k = self.next
                    if k >= stop:  # all ran, a failure, or the caller took the rest or abandoned them
                        self.current = -1
                        final = not self.signalled
                        self.signalled = True
                        break
                    self.next = k + 1
                    self.current = k
                    self.since = monotonic()
                finally:
                    release()
                entry = entries[k]
                error = resolved(entry, execution, out)
        except BaseException as exc:  # reported as the call's failure, never lost
            return self._broke(exc)
        return self._wake_up if final else None

    def _broke(self, exc: BaseException) -> Callable[[], None] | None:
        """``run`` raised (a bug of bash-env's own): fail the call with it, release its count, wake it."""
        with self._lock:
            k = max(self.current, 0)
            if self.kept:
                self.kept = False
                self.resolves.release(self.entries[k], self.since)
            self.current, self.next = -1, len(self.entries)
            if self.failed is None:
                entry = self.entries[k]
                self.failed = (
                    k,
                    CollectionError(
                        f"dsh-bash-env failed while running contributor {entry.who()}'s resolve: "
                        f"{type(exc).__name__}{_detail(exc)} (a bug in dsh-bash-env; please report it)",
                        contributor=entry.name,
                    ),
                )
            final = not self.signalled
            self.signalled = True
        return self._wake_up if final else None

    def _wake_up(self) -> None:
        self._wake.release()
        callback = self._callback
        if callback is not None:
            callback()

    def on_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (from any thread) when the caller should look again: at once if it should."""
        with self._lock:
            now = self.signalled
            if not now:
                self._callback = callback
        if now:
            callback()
        self.start()

    def wait(self, timeout: float) -> bool:
        """Start the batch if not yet; block up to ``timeout`` seconds for the worker's wake-up; True if it came."""
        self.start()
        return self._wake.acquire(timeout=timeout)

    def left(self) -> float | None:
        """Seconds the caller may wait before looking again, or None once woken.

        Raises the contributor's deadline error when the running resolve passed its deadline.
        """
        timeout = self.resolves.timeout
        if not self.started:
            return timeout
        with self._lock:
            if self.signalled:
                return None
            k = self.current
            if k < 0:  # not started yet (the worker is on its way): its deadline starts with it
                return timeout
            left = self.since + timeout - time.monotonic()
            if left > 0:
                return left
            entry = self.entries[k]
        raise self.resolves.overran(entry)  # the caller's exit abandons the batch

    def take_rest(self, patience: float) -> tuple[int, float]:
        """Hand out the resolves not yet started once the running one has taken ``patience`` seconds.

        ``(first, 0.0)``: the worker stops after the running resolve, and resolves from ``first`` on
        are the caller's to start. ``(-1, seconds)``: nothing to hand out (yet), look again then.
        """
        with self._lock:
            if self.signalled or self.next >= min(self.needed, len(self.entries)):
                return -1, float("inf")
            if self.current < 0:  # not handed over, or the worker is on its way
                return -1, patience
            ran = time.monotonic() - self.since
            if ran < patience:
                return -1, patience - ran
            first, self.next = self.next, len(self.entries)
            return first, 0.0

    def abandon(self) -> None:
        """The caller stops waiting: the running resolve runs on unwatched, tracked from its start
        until it ends; the resolves not yet started never start.

        A batch never started (the call stopped before its first wait) starts nothing.
        """
        if not self.started:
            return
        with self._lock:
            k = self.current
            self.next = len(self.entries)  # the worker stops after the resolve it runs
            if k >= 0 and not self.kept:
                self.resolves.keep(self.entries[k], self.since)
                self.kept = True


class Call:
    """The resolves of one call: built-ins resolved inline, the others handed to one worker as a batch.

    When the batch's running resolve passes :data:`PATIENCE`, the resolves behind it become batches
    of one each, started at once; the call then waits for its batches in name order.
    """

    __slots__ = ("_at", "_batches", "_builtin_failed", "_split")

    def __init__(
        self, resolves: Resolves, entries: Sequence[Entry], execution: ToolExecution, out: dict[str, str]
    ) -> None:
        if resolves.unwatched:
            for entry in entries:
                refusal = None if entry.builtin else resolves.refusal(entry)
                if refusal is not None:
                    raise refusal  # before anything starts: no worker for a call that fails anyway
        others: list[Entry] = []
        # The first built-in to fail, after how many third-party resolves in name order.
        self._builtin_failed: tuple[int, CollectionError] | None = None
        for entry in entries:
            if not entry.builtin:
                others.append(entry)
            elif self._builtin_failed is None:  # the harness's own contributors: inline, no thread hop
                error = resolved(entry, execution, out)
                if error is not None:
                    self._builtin_failed = (len(others), error)
        needed = len(others) if self._builtin_failed is None else self._builtin_failed[0]
        # Started by the first wait, right before the caller blocks.
        self._batches = [Batch(resolves, others, execution, out, needed)] if needed else []
        self._at = 0  # the first batch whose outcome is not in yet
        self._split = False  # the first batch handed out the resolves behind a slow one

    def __enter__(self) -> Call:
        return self

    def __exit__(self, *exc: object) -> None:
        for batch in self._batches:
            batch.abandon()

    def left(self) -> float | None:
        """Seconds to wait before looking again, or None when every outcome the call needs is in.

        Raises a contributor's deadline error when the resolve waited for passed its deadline.
        """
        batches = self._batches
        while self._at < len(batches):
            batch = batches[self._at]
            left = batch.left()
            if left is None:
                if batch.failed is not None:  # every failure after it comes later in name order
                    return None
                self._at += 1
                continue
            if not self._split:
                first, until = batch.take_rest(PATIENCE)
                if first >= 0:
                    self._split = True
                    last = min(batch.needed, len(batch.entries))
                    for i in range(first, last):
                        # Its own snapshot part, merged in name order by check(): not in the order they end.
                        apart = Batch(batch.resolves, [batch.entries[i]], batch.execution, {}, 1, base=i)
                        apart.start()
                        batches.append(apart)
                    continue
                left = min(left, until)
            return left
        return None

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the awaited batch's wake-up (only when :meth:`left` gave a time)."""
        return self._batches[self._at].wait(timeout)

    def on_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` from a worker when the caller should look again (for an event loop)."""
        self._batches[self._at].on_ready(callback)

    def check(self) -> None:
        """Raise the call's first failure in name order, if any (once :meth:`left` gave None); else
        complete the snapshot with the values of the resolves that ran apart, in name order."""
        builtin, other = self._builtin_failed, None
        for batch in self._batches:  # in name order: the first batch's resolves come first
            if batch.failed is not None:
                k, error = batch.failed
                other = (batch.base + k, error)
                break
        if builtin is not None and (other is None or builtin[0] <= other[0]):
            raise builtin[1]
        if other is not None:
            raise other[1]
        if self._split:
            out = self._batches[0].out
            for batch in self._batches[1:]:
                out.update(batch.out)


_WORKERS: _Workers | None = None


def _workers() -> _Workers:
    """The worker threads, imported only when a contributor of another package runs."""
    global _WORKERS
    if _WORKERS is None:
        from ._workers import WORKERS

        _WORKERS = WORKERS
    return _WORKERS


def sealed(out: dict[str, str]) -> Mapping[str, str]:
    """The snapshot, read-only, once its total size is checked."""
    total = sum(map(len, out)) + sum(map(len, out.values()))
    if total > MAX_SNAPSHOT_BYTES:
        largest = max(out, key=lambda k: len(out[k]))
        raise CollectionError(
            f"the managed variables of this call add up to {total} characters; the maximum is "
            f"{MAX_SNAPSHOT_BYTES} (largest: '{largest}')",
            key=largest,
        )
    return ReadOnlyDict(out)


def check(entry: Entry, values: object, out: dict[str, str]) -> None:
    """Copy ``values`` into ``out``, refusing a non-mapping, an undeclared key or a bad value."""
    if type(values) is not dict and not isinstance(values, Mapping):
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
        size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogateescape"))
        if size > MAX_VALUE_BYTES:
            raise CollectionError(
                f"contributor {entry.who()} returned {size} bytes for key '{key}'; "
                f"the maximum is {MAX_VALUE_BYTES} bytes",
                contributor=entry.name,
                key=key,
            )
        out[key] = value
