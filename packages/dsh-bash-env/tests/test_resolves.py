"""A call's third-party resolves run together, each on its contributor's own threads, under the call's deadline.

Real threads and real sleeps, short deadlines: a stuck contributor costs its call one deadline and
never holds up the other contributors, an exiting one is that contributor's failure, and calls
made together (the served path) never see each other's values.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import pytest

from dsh.bash_env import BashEnvRegistry, CollectionError, FunctionContributor
from dsh.bash_env._pool import DaemonPool
from dsh.bash_env._resolve import THREADS_PER_CONTRIBUTOR
from dsh.session import ToolExecution

DEADLINE = 0.3
CALL = ToolExecution("bash", "calm")
STUCK = ToolExecution("bash", "stuck")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let every resolve still stuck end


@pytest.fixture
def registry() -> BashEnvRegistry:
    return BashEnvRegistry("/h", resolve_timeout=DEADLINE)


def _stuck(name: str, release: threading.Event) -> FunctionContributor:
    """Hangs on calls whose id is 'stuck' until the test ends; answers at once otherwise."""
    key = "DSH_" + name.upper().replace("-", "_")

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        if execution.call_id == "stuck":
            release.wait(30)
        return {key: "late" if execution.call_id == "stuck" else "ok"}

    return FunctionContributor(name, {key: "stuck on some calls"}, resolve)


def _healthy(name: str, seen: dict[str, list[str]]) -> FunctionContributor:
    """Answers with the call's own id, noting which call it resolved for and on which thread."""
    key = "DSH_" + name.upper().replace("-", "_")

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        seen.setdefault(name, []).append(execution.call_id)
        seen.setdefault("threads", []).append(str(threading.get_ident()))
        return {key: execution.call_id}

    return FunctionContributor(name, {key: "the call's id"}, resolve)


def _eventually(condition: Callable[[], bool], within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.mark.parametrize("waiting", ["blocking", "async"])
def test_a_calls_resolves_run_together_off_the_callers_thread_and_land_in_name_order(waiting: str) -> None:
    registry = BashEnvRegistry("/h", resolve_timeout=5.0)
    together = threading.Barrier(4, timeout=5)  # passes only when all four resolve at the same time
    threads: set[int] = set()

    def meeting(name: str) -> FunctionContributor:
        key = f"DSH_{name.upper()}"

        def resolve(execution: ToolExecution) -> Mapping[str, str]:
            threads.add(threading.get_ident())
            together.wait()
            return {key: execution.call_id}

        return FunctionContributor(name, {key: "meets the others"}, resolve)

    for name in ("d", "b", "a", "c"):
        registry.register(meeting(name))
    snap = _collect(registry, waiting)
    assert [k for k in snap if k in ("DSH_A", "DSH_B", "DSH_C", "DSH_D")] == ["DSH_A", "DSH_B", "DSH_C", "DSH_D"]
    assert set(snap.values()) >= {"calm"}
    assert len(threads) == 4 and threading.get_ident() not in threads


def test_only_builtins_resolve_inline_without_a_worker(registry: BashEnvRegistry) -> None:
    seen: dict[str, list[str]] = {}
    registry.register(_healthy("inline", seen), builtin=True)
    before = threading.active_count()
    assert registry.collect(CALL)["DSH_INLINE"] == "calm"
    assert seen["threads"] == [str(threading.get_ident())]
    assert threading.active_count() == before


def test_a_stuck_contributor_costs_its_call_one_deadline_and_the_ones_behind_it_run(
    registry: BashEnvRegistry, release: threading.Event
) -> None:
    seen: dict[str, list[str]] = {}
    registry.register(_stuck("a-stuck", release))
    for name in ("b", "c", "d"):
        registry.register(_healthy(name, seen))
    started = time.monotonic()
    with pytest.raises(CollectionError, match=r"^contributor 'a-stuck' did not resolve within its 0\.3 s deadline"):
        registry.collect(STUCK)
    took = time.monotonic() - started
    assert took >= DEADLINE
    assert took < 3 * DEADLINE, f"one stuck contributor cost its call {took:.2f} s"
    # The stuck resolve still holds its thread, yet the others ran on theirs.
    assert _eventually(lambda: all(seen.get(n) == ["stuck"] for n in ("b", "c", "d"))), seen
    assert not release.is_set()


def test_slow_contributors_that_are_each_in_time_pass(registry: BashEnvRegistry) -> None:
    # Three resolves of 0.15 s each: 0.45 s in all, more than one deadline, yet each is within its own.
    def sleepy(name: str) -> FunctionContributor:
        key = f"DSH_{name.upper()}"

        def resolve(execution: ToolExecution) -> Mapping[str, str]:
            time.sleep(DEADLINE / 2)
            return {key: name}

        return FunctionContributor(name, {key: "slow but in time"}, resolve)

    for name in ("a", "b", "c"):
        registry.register(sleepy(name))
    snap = registry.collect(CALL)
    assert (snap["DSH_A"], snap["DSH_B"], snap["DSH_C"]) == ("a", "b", "c")
    snap = asyncio.run(registry.collect_async(CALL))
    assert (snap["DSH_A"], snap["DSH_B"], snap["DSH_C"]) == ("a", "b", "c")


@pytest.mark.parametrize("waiting", ["blocking", "async"])
def test_two_stuck_contributors_cost_one_deadline_and_stay_bounded(
    registry: BashEnvRegistry, release: threading.Event, waiting: str
) -> None:
    seen: dict[str, list[str]] = {}
    registry.register(_stuck("a-stuck", release))
    registry.register(_stuck("b-stuck", release))
    registry.register(_healthy("c", seen))

    def collect(execution: ToolExecution) -> Mapping[str, str]:
        if waiting == "async":
            return asyncio.run(registry.collect_async(execution))
        return registry.collect(execution)

    before = threading.active_count()
    for attempt in range(THREADS_PER_CONTRIBUTOR):
        started = time.monotonic()
        with pytest.raises(CollectionError, match=r"^contributor 'a-stuck' did not resolve within its 0\.3 s"):
            collect(STUCK)
        took = time.monotonic() - started
        assert DEADLINE <= took < 3 * DEADLINE, f"two stuck contributors cost call {attempt} {took:.2f} s"
        # c, behind both, still runs: the second stuck one never held it up.
        assert _eventually(lambda n=attempt + 1: len(seen.get("c", [])) == n), seen
    # Each has THREADS_PER_CONTRIBUTOR resolves stuck now: the next call fails at once, starting nothing.
    threads = threading.active_count()
    started = time.monotonic()
    with pytest.raises(CollectionError, match=f"'a-stuck' is still running {THREADS_PER_CONTRIBUTOR} resolve"):
        collect(CALL)
    assert time.monotonic() - started < DEADLINE
    assert threading.active_count() == threads <= before + 2 * THREADS_PER_CONTRIBUTOR + 3
    release.set()
    assert _eventually(lambda: _succeeds(collect)), "the contributors never recovered once released"


def _succeeds(collect: Callable[[ToolExecution], Mapping[str, str]]) -> bool:
    try:
        return collect(CALL)["DSH_C"] == "calm"
    except CollectionError:
        return False


@pytest.mark.parametrize("position", ["first", "between"])
def test_system_exit_in_a_resolve_is_that_contributors_failure(registry: BashEnvRegistry, position: str) -> None:
    seen: dict[str, list[str]] = {}
    exiting = "a-exits" if position == "first" else "b-exits"

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        if execution.call_id == "exit":
            raise SystemExit(3)
        return {"DSH_EXITS": "no"}

    registry.register(FunctionContributor(exiting, {"DSH_EXITS": "exits on some calls"}, resolve))
    registry.register(_healthy("a-healthy", seen))
    registry.register(_healthy("c-healthy", seen))
    registry.collect(CALL)
    threads = threading.active_count()
    for _ in range(3):
        with pytest.raises(CollectionError) as caught:
            registry.collect(ToolExecution("bash", "exit"))
        assert str(caught.value) == f"contributor '{exiting}' raised SystemExit while resolving: 3"
        assert caught.value.contributor == exiting
        with pytest.raises(CollectionError, match=f"^contributor '{exiting}' raised SystemExit"):
            asyncio.run(registry.collect_async(ToolExecution("bash", "exit")))
    # Its thread survived every exit, and the next calls resolve as usual.
    snap = registry.collect(CALL)
    assert (snap["DSH_EXITS"], snap["DSH_A_HEALTHY"], snap["DSH_C_HEALTHY"]) == ("no", "calm", "calm")
    assert _eventually(lambda: threading.active_count() <= threads + 3)


def test_the_calls_after_a_stuck_call_resolve_at_once(registry: BashEnvRegistry, release: threading.Event) -> None:
    seen: dict[str, list[str]] = {}
    registry.register(_healthy("a", seen))
    registry.register(_stuck("b-stuck", release))
    registry.register(_healthy("c", seen))
    with pytest.raises(CollectionError, match="'b-stuck' did not resolve"):
        registry.collect(STUCK)
    for i in range(20):  # b's thread stuck in that call is never handed another resolve
        started = time.monotonic()
        snap = registry.collect(ToolExecution("bash", f"after-{i}"))
        assert time.monotonic() - started < DEADLINE
        assert (snap["DSH_A"], snap["DSH_B_STUCK"], snap["DSH_C"]) == (f"after-{i}", "ok", f"after-{i}")
    assert not release.is_set()


def test_calls_made_together_each_see_their_own_values(release: threading.Event) -> None:
    # 66 calls at once share each contributor's 8 threads: a deadline of 2 s, not 0.3, so that a
    # loaded 2-vCPU machine (load average 18 measured) never fails a healthy queued resolve.
    registry = BashEnvRegistry("/h", resolve_timeout=2.0)
    seen: dict[str, list[str]] = {}
    names = [f"c{i}" for i in range(10)]
    for name in names:
        registry.register(_healthy(name, seen))
    registry.register(_stuck("z-stuck", release))
    keys = [f"DSH_{n.upper()}" for n in names]
    wrong: list[str] = []
    failed: list[str] = []

    def check(call_id: str, snap: Mapping[str, str]) -> None:
        wrong.extend(f"{call_id} saw {snap[k]}" for k in keys if snap[k] != call_id)

    def thread(t: int) -> None:
        for i in range(40):
            call_id = f"t{t}-{i}"
            try:
                check(call_id, registry.collect(ToolExecution("bash", call_id)))
            except CollectionError as exc:
                failed.append(str(exc))

    async def served() -> None:
        async def one(call_id: str) -> None:
            check(call_id, await registry.collect_async(ToolExecution("bash", call_id)))

        await asyncio.gather(*(one(f"loop-{i}") for i in range(60)))

    threads = [threading.Thread(target=thread, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    asyncio.run(served())
    # A stuck call among them fails alone, and the others go on meanwhile.
    with pytest.raises(CollectionError, match="'z-stuck' did not resolve"):
        registry.collect(STUCK)
    for t in threads:
        t.join(30)
    assert failed == [] and wrong == []
    assert len(seen["c0"]) == 6 * 40 + 60 + 1


def test_a_call_fails_with_its_first_failure_in_name_order(registry: BashEnvRegistry) -> None:
    """Built-ins resolve inline and the others on their threads, yet the error is the first by name."""

    def failing(name: str, *, builtin: bool = False) -> FunctionContributor:
        def resolve(execution: ToolExecution) -> Mapping[str, str]:
            if execution.call_id == name or execution.call_id == "all":
                raise RuntimeError(f"{name} broke")
            return {}

        return FunctionContributor(name, {f"DSH_{name.upper()}": "fails on its call"}, resolve)

    seen: dict[str, list[str]] = {}
    registry.register(failing("a"))
    registry.register(failing("m"), builtin=True)
    registry.register(failing("z"))
    registry.register(_healthy("zz", seen))
    for call_id, first in (("all", "a"), ("m", "m"), ("z", "z"), ("a", "a")):
        with pytest.raises(CollectionError, match=f"^contributor '{first}' raised RuntimeError while resolving"):
            registry.collect(ToolExecution("bash", call_id))
        with pytest.raises(CollectionError, match=f"^contributor '{first}' raised RuntimeError while resolving"):
            asyncio.run(registry.collect_async(ToolExecution("bash", call_id)))
    assert registry.collect(CALL)["DSH_ZZ"] == "calm"


def _sleepy(name: str, seconds: float, *, fails: bool = False) -> FunctionContributor:
    key = "DSH_" + name.upper().replace("-", "_")

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        time.sleep(seconds)
        if fails:
            raise RuntimeError(f"{name} broke")
        return {key: name}

    return FunctionContributor(name, {key: "takes a while"}, resolve)


def _collect(registry: BashEnvRegistry, waiting: str) -> Mapping[str, str]:
    return asyncio.run(registry.collect_async(CALL)) if waiting == "async" else registry.collect(CALL)


@pytest.mark.parametrize("waiting", ["blocking", "async"])
def test_slow_contributors_overlap(waiting: str) -> None:
    # Three that each take 0.3 s, well within their 2 s deadline: one after another they would cost
    # the call 0.9 s; run together, about 0.3 s.
    registry = BashEnvRegistry("/h", resolve_timeout=2.0)
    for name in ("a", "b", "c"):
        registry.register(_sleepy(name, 0.3))
    started = time.monotonic()
    snap = _collect(registry, waiting)
    took = time.monotonic() - started
    assert (snap["DSH_A"], snap["DSH_B"], snap["DSH_C"]) == ("a", "b", "c")
    assert took < 0.75, f"three 0.3 s contributors cost their call {took:.2f} s: they ran one after another"


@pytest.mark.parametrize("waiting", ["blocking", "async"])
def test_the_first_failure_by_name_wins_over_the_first_in_time(waiting: str) -> None:
    # 'b' fails at once on its own thread while 'a' is still running; 'a' fails later: the call's
    # error is still a's, the first in name order, not the first in time.
    registry = BashEnvRegistry("/h", resolve_timeout=2.0)
    registry.register(_sleepy("a", 0.2, fails=True))
    registry.register(_sleepy("b", 0.0, fails=True))
    registry.register(_sleepy("c", 0.0))
    with pytest.raises(CollectionError, match=r"^contributor 'a' raised RuntimeError while resolving: a broke"):
        _collect(registry, waiting)
    registry = BashEnvRegistry("/h", resolve_timeout=2.0)
    registry.register(_sleepy("a", 0.2))
    registry.register(_sleepy("b", 0.0, fails=True))
    with pytest.raises(CollectionError, match=r"^contributor 'b' raised RuntimeError while resolving: b broke"):
        _collect(registry, waiting)


def _running(registry: BashEnvRegistry, name: str) -> int:
    """How many of ``name``'s resolves run now (internal, for the bounds these tests check)."""
    entry = registry._state.entries.get(name)
    assert entry is not None
    return entry.stuck(float("inf"))


def _drains(registry: BashEnvRegistry) -> bool:
    return _eventually(lambda: not any(_running(registry, name) for name in registry.contributors()))


def test_a_fast_failing_contributor_never_gets_a_healthy_one_blamed() -> None:
    # a-broken fails at once; b and c take a while but are always in time. Calls made together
    # (the served path) each fail with a-broken's error, however many resolves they leave behind.
    registry = BashEnvRegistry("/h", resolve_timeout=1.0)

    def broken(execution: ToolExecution) -> Mapping[str, str]:
        raise ValueError("backend config missing")

    registry.register(FunctionContributor("a-broken", {"DSH_A": "fails"}, broken))
    registry.register(_sleepy("b-healthy", 0.1))
    registry.register(_sleepy("c-healthy", 0.1))
    errors: list[str] = []

    def thread() -> None:
        for i in range(6):
            try:
                registry.collect(ToolExecution("bash", f"call-{i}"))
            except CollectionError as exc:
                errors.append(str(exc))

    threads = [threading.Thread(target=thread) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == ["contributor 'a-broken' raised ValueError while resolving: backend config missing"] * 36
    assert _drains(registry)


def test_calls_cancelled_while_a_healthy_contributor_resolves_never_refuse_the_next_call() -> None:
    # Served clients that disconnect while the contributor resolves, well within its deadline.
    registry = BashEnvRegistry("/h", resolve_timeout=2.0)
    registry.register(_sleepy("healthy", 0.3))

    async def main() -> Mapping[str, str]:
        calls = [
            asyncio.ensure_future(registry.collect_async(ToolExecution("bash", f"gone-{i}")))
            for i in range(THREADS_PER_CONTRIBUTOR + 1)
        ]
        await asyncio.sleep(0.05)
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        # Left running, blaming nobody: as many as its threads; the last never started.
        assert _running(registry, "healthy") == THREADS_PER_CONTRIBUTOR
        return await registry.collect_async(ToolExecution("bash", "next"))

    assert asyncio.run(main())["DSH_HEALTHY"] == "healthy"
    assert _drains(registry)


def test_a_resolve_left_running_counts_against_its_contributor_only_once_past_its_deadline(
    release: threading.Event,
) -> None:
    deadline = 0.5
    registry = BashEnvRegistry("/h", resolve_timeout=deadline)
    registry.register(_stuck("hangs", release))

    async def cancelled_calls(count: int) -> None:
        calls = [asyncio.ensure_future(registry.collect_async(STUCK)) for _ in range(count)]
        await asyncio.sleep(0.05)
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)

    started = time.monotonic()
    asyncio.run(cancelled_calls(THREADS_PER_CONTRIBUTOR - 1))
    # Still within their deadline: nobody is blamed yet, and the next call runs its own resolve.
    assert registry.collect(CALL)["DSH_HANGS"] == "ok"
    assert time.monotonic() - started < deadline, "the machine was too slow to check within the deadline"
    asyncio.run(cancelled_calls(1))
    # Every thread of it is taken now, each within its deadline: a call waits for one, in vain, and
    # fails at its own deadline, saying why.
    with pytest.raises(CollectionError) as caught:
        registry.collect(CALL)
    assert str(caught.value) == (
        "contributor 'hangs' did not start resolving within its 0.5 s deadline: its "
        f"{THREADS_PER_CONTRIBUTOR} threads were busy with other calls' resolves (bash-env config resolve_timeout)"
    )
    time.sleep(max(0.0, deadline - (time.monotonic() - started)) + 0.05)
    # Now each passed its deadline: refused at once, with the number.
    refused = time.monotonic()
    with pytest.raises(CollectionError) as caught:
        registry.collect(CALL)
    assert time.monotonic() - refused < deadline / 2
    assert str(caught.value) == (
        f"contributor 'hangs' is still running {THREADS_PER_CONTRIBUTOR} resolve() calls that passed their "
        "0.5 s deadline; this call fails without starting another"
    )
    release.set()
    assert _drains(registry)
    assert registry.collect(CALL)["DSH_HANGS"] == "ok"


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() broken")


@pytest.mark.parametrize("waiting", ["blocking", "async"])
def test_an_exception_whose_str_raises_fails_its_call_at_once_and_strands_nothing(
    waiting: str, capfd: pytest.CaptureFixture[str]
) -> None:
    registry = BashEnvRegistry("/h", resolve_timeout=1.0)

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        raise _Unprintable

    registry.register(FunctionContributor("odd", {"DSH_ODD": "o"}, resolve))
    registry.register(_healthy("p", {}))
    threads = threading.active_count()
    for _ in range(3 * THREADS_PER_CONTRIBUTOR):  # more calls than the threads it may have
        started = time.monotonic()
        with pytest.raises(CollectionError) as caught:
            _collect(registry, waiting)
        assert time.monotonic() - started < 0.5, "it raised at once, yet its call waited for the deadline"
        assert str(caught.value) == (
            "contributor 'odd' raised _Unprintable while resolving "
            "(its message could not be read: RuntimeError: str() broken)"
        )
    # Bounded by the contributors' threads, not by the calls: none died and was replaced per call.
    assert threading.active_count() <= threads + 2 * THREADS_PER_CONTRIBUTOR
    assert _drains(registry)
    assert capfd.readouterr().err == ""  # no thread traceback on the user's terminal


@pytest.mark.parametrize("waiting", ["blocking", "async"])
def test_a_bug_in_bash_env_fails_its_call_and_strands_neither_caller_nor_count(
    waiting: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # Fault injection: resolved() never raises, so make it, to reach the caller's own last guard.
    import dsh.bash_env._resolve as resolve_module

    registry = BashEnvRegistry("/h", resolve_timeout=1.0)
    registry.register(_healthy("a", {}))
    registry.register(_healthy("b", {}))
    _collect(registry, waiting)
    threads = threading.active_count()

    def broken(*args: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(resolve_module, "resolved", broken)
    for _ in range(3 * THREADS_PER_CONTRIBUTOR):  # more calls than the threads it may have
        started = time.monotonic()
        with pytest.raises(CollectionError) as caught:
            _collect(registry, waiting)
        assert time.monotonic() - started < 0.5
        assert str(caught.value) == (
            "dsh-bash-env failed while running contributor 'a''s resolve: TypeError: a bug "
            "(a bug in dsh-bash-env; please report it)"
        )
        assert caught.value.contributor == "a"
    monkeypatch.undo()
    assert _drains(registry)
    assert _collect(registry, waiting)["DSH_B"] == "calm"
    assert threading.active_count() <= threads + 2 * THREADS_PER_CONTRIBUTOR
    assert capfd.readouterr().err == ""


def test_a_raising_job_leaves_its_thread_alive_and_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    pool = DaemonPool(2, "test")
    ran: list[int] = []

    def raising() -> None:
        ran.append(threading.get_ident())
        raise SystemExit("a job's own")

    def noting() -> int:
        ran.append(threading.get_ident())
        return 7

    failed = pool.submit(raising)
    assert isinstance(failed.exception(5), SystemExit)  # on its future, never on the terminal
    assert pool.submit(noting).result(5) == 7
    assert ran[0] == ran[1] and pool.threads == 1  # the same thread, alive
    pool.shutdown()
    assert capfd.readouterr().err == ""


def test_the_pool_is_bounded_and_work_past_its_size_waits() -> None:
    pool = DaemonPool(3, "test")
    release = threading.Event()
    held = [pool.submit(release.wait, 30) for _ in range(5)]
    assert _eventually(lambda: sum(f.running() for f in held) == 3)
    assert pool.threads == 3 and not held[3].running() and not held[4].running()
    assert held[4].cancel()  # never started: cancelled, and never runs
    release.set()
    assert held[3].result(5) is True and held[4].cancelled()
    pool.shutdown()


EXITS_PAST_A_STUCK_JOB = """
import sys, time
from dsh.bash_env._pool import DaemonPool

pool = DaemonPool(1, "stuck")
pool.submit(time.sleep, 60)
time.sleep(0.1)
sys.exit(3)
"""


def test_a_stuck_job_never_holds_the_interpreter_at_exit() -> None:
    # What ThreadPoolExecutor would do (it joins its threads at exit): dsh would wait for a resolve
    # that never returns after its call had already failed.
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", EXITS_PAST_A_STUCK_JOB], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert time.monotonic() - started < 30 and done.stderr == ""


@pytest.mark.parametrize("waiting", ["blocking", "async"])
def test_the_snapshot_keeps_name_order_whatever_order_resolves_end_in(waiting: str) -> None:
    registry = BashEnvRegistry("/h", resolve_timeout=2.0)
    registry.register(_sleepy("a", 0.05))
    registry.register(_sleepy("b", 0.0))
    registry.register(_sleepy("c", 0.0))
    assert [k for k in _collect(registry, waiting) if k in ("DSH_A", "DSH_B", "DSH_C")] == ["DSH_A", "DSH_B", "DSH_C"]


@pytest.mark.parametrize("waiting", ["blocking", "async"])
def test_an_optional_contributors_failure_is_a_warning_and_its_keys_are_absent(
    waiting: str, release: threading.Event
) -> None:
    registry = BashEnvRegistry("/h", resolve_timeout=DEADLINE, optional=("a-broken", "b-stuck"))

    def broken(execution: ToolExecution) -> Mapping[str, str]:
        raise ValueError("backend config missing")

    registry.register(FunctionContributor("a-broken", {"DSH_A": "fails"}, broken))
    registry.register(_stuck("b-stuck", release))
    registry.register(_healthy("c", {}))
    started = time.monotonic()
    snap = asyncio.run(registry.collect_async(STUCK)) if waiting == "async" else registry.collect(STUCK)
    assert time.monotonic() - started < 3 * DEADLINE  # the stuck one costs the call one deadline, no more
    assert "DSH_A" not in snap and "DSH_B_STUCK" not in snap and snap["DSH_C"] == "stuck"
    assert snap.warnings == (
        "contributor 'a-broken' raised ValueError while resolving: backend config missing "
        "(optional in the bash-env config: its keys are left out of this call)",
        "contributor 'b-stuck' did not resolve within its 0.3 s deadline (bash-env config resolve_timeout) "
        "(optional in the bash-env config: its keys are left out of this call)",
    )
    calm = _collect(registry, waiting)  # b answers calm calls at once; a still fails, alone
    assert calm["DSH_B_STUCK"] == "ok" and len(calm.warnings) == 1
    required = BashEnvRegistry("/h", resolve_timeout=DEADLINE)
    required.register(FunctionContributor("a-broken", {"DSH_A": "fails"}, broken))
    with pytest.raises(CollectionError, match="'a-broken' raised ValueError"):
        _collect(required, waiting)
