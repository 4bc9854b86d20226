"""Contributors are third-party code: slow, huge, raising or exiting, each fails only its own call."""

from __future__ import annotations

import ast
import asyncio
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from dsh.bash_env import BASH_ENV_GROUP, BashEnvRegistry, CollectionError, FunctionContributor
from dsh.bash_env._declare import MAX_VALUE_BYTES
from dsh.bash_env._resolve import THREADS_PER_CONTRIBUTOR
from dsh.core import EscapedError, FiberState
from dsh.loader import contained
from dsh.session import ToolExecution
from tests.helpers import harness, make_dist

CALL = ToolExecution("bash", "c")
SLOW = ToolExecution("bash", "slow")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let any resolver still waiting finish


@pytest.fixture
def registry() -> BashEnvRegistry:
    return BashEnvRegistry("/h", resolve_timeout=0.2)


def _slow(release: threading.Event) -> FunctionContributor:
    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        if execution.call_id == "slow":
            release.wait(30)
        return {"DSH_SLOW": "done"}

    return FunctionContributor("slow", {"DSH_SLOW": "s"}, resolve)


def test_a_slow_contributor_fails_its_call_at_the_deadline(registry: BashEnvRegistry, release: threading.Event) -> None:
    registry.register(_slow(release))
    with pytest.raises(CollectionError, match=r"^contributor 'slow' did not resolve within its 0\.2 s deadline"):
        registry.collect(SLOW)
    # Its other calls go on while that resolve still runs.
    assert registry.collect(CALL)["DSH_SLOW"] == "done"
    for _ in range(THREADS_PER_CONTRIBUTOR - 1):
        with pytest.raises(CollectionError, match="did not resolve"):
            registry.collect(SLOW)
    # With all its threads stuck past their deadline, calls fail at once instead of waiting for one.
    threads = threading.active_count()
    with pytest.raises(
        CollectionError, match=f"still running {THREADS_PER_CONTRIBUTOR} resolve\\(\\) calls that passed their"
    ):
        registry.collect(CALL)
    assert threading.active_count() == threads
    release.set()
    for _ in range(100):
        try:
            assert registry.collect(CALL)["DSH_SLOW"] == "done"
            break
        except CollectionError:
            time.sleep(0.05)  # the stuck resolve is finishing
    else:
        pytest.fail("the contributor never recovered after its stuck resolve ended")


def test_collect_async_leaves_the_loop_free_for_other_calls(
    registry: BashEnvRegistry, release: threading.Event
) -> None:
    registry.register(_slow(release))
    order: list[str] = []

    async def slow() -> None:
        with pytest.raises(CollectionError, match="'slow' did not resolve"):
            await registry.collect_async(SLOW)
        order.append("slow failed")

    async def others() -> None:
        for _ in range(3):
            await asyncio.sleep(0)  # runs only if the slow collection is not holding the loop
            order.append("other ran")

    async def main() -> None:
        await asyncio.gather(slow(), others())

    asyncio.run(main())
    assert order == ["other ran", "other ran", "other ran", "slow failed"]


@pytest.mark.parametrize(
    ("raised", "shown"),
    [
        (RuntimeError("backend down"), "RuntimeError while resolving: backend down"),
        (SystemExit(3), "SystemExit while resolving: 3"),
        (KeyboardInterrupt(), "KeyboardInterrupt while resolving"),
        (GeneratorExit(), "GeneratorExit while resolving"),
    ],
)
def test_any_exception_is_the_contributors_failure(
    registry: BashEnvRegistry, raised: BaseException, shown: str
) -> None:
    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        raise raised

    registry.register(FunctionContributor("boom", {"DSH_BOOM": "b"}, resolve))
    with pytest.raises(CollectionError) as caught:
        registry.collect(CALL)
    assert str(caught.value) == f"contributor 'boom' raised {shown}"
    with pytest.raises(CollectionError):
        asyncio.run(registry.collect_async(CALL))


def test_huge_nul_and_non_mapping_values_are_errors(registry: BashEnvRegistry) -> None:
    answers: dict[str, object] = {}
    registry.register(FunctionContributor("odd", {"DSH_ODD": "o"}, lambda e: answers["value"]))  # type: ignore[arg-type,return-value]
    answers["value"] = {"DSH_ODD": "x" * (10 * 1024 * 1024)}
    with pytest.raises(CollectionError) as caught:
        registry.collect(CALL)
    assert str(caught.value) == (
        f"contributor 'odd' returned 10485760 bytes for key 'DSH_ODD'; the maximum is {MAX_VALUE_BYTES} bytes"
    )
    answers["value"] = {"DSH_ODD": "x" * MAX_VALUE_BYTES}
    assert len(registry.collect(CALL)["DSH_ODD"]) == MAX_VALUE_BYTES
    answers["value"] = {"DSH_ODD": "a\0b"}
    with pytest.raises(CollectionError, match="contributor 'odd' returned a NUL character in key 'DSH_ODD'"):
        registry.collect(CALL)
    for value, kind in ((None, "None"), (["DSH_ODD"], "a list"), ("DSH_ODD=x", "a str")):
        answers["value"] = value
        with pytest.raises(CollectionError) as caught:
            registry.collect(CALL)
        assert str(caught.value) == (
            f"contributor 'odd' returned {kind} from resolve(), not a mapping of keys to strings"
        )


def test_resolve_timeout_is_configured_in_the_deployment(tmp_path: Path) -> None:
    runtime = harness(tmp_path, plugins=[{"id": "bash-env", "name": "bash-env", "config": {"resolve_timeout": 0.5}}])
    try:
        from dsh.bash_env import BASH_ENV

        assert runtime.ctx.require(BASH_ENV).resolve_timeout == 0.5
    finally:
        runtime.close()
    with pytest.raises(Exception, match="resolve_timeout"):
        harness(tmp_path, plugins=[{"id": "bash-env", "name": "bash-env", "config": {"resolve_timeout": 0}}])


def test_system_exit_at_import_fails_only_that_contributor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    make_dist(
        site,
        "dsh-exits-at-import",
        "0.3",
        {BASH_ENV_GROUP: {"exiter": "exits_at_import:contributor", "interrupter": "interrupts_at_import:make"}},
        {
            "exits_at_import": "raise SystemExit(4)\n",
            "interrupts_at_import": "def make():\n    raise KeyboardInterrupt\n",
        },
    )
    monkeypatch.syspath_prepend(str(site))
    try:
        runtime = harness(tmp_path, plugins=[{"id": "bash-env", "name": "bash-env"}])
        try:
            states = {f.label: f.state for f in runtime.fibers() if f.label.startswith("bash-env:")}
            assert states == {"bash-env:exiter": FiberState.FAILED, "bash-env:interrupter": FiberState.FAILED}
            warnings = runtime.warnings()
            assert (
                "plugin 'bash-env:exiter' (from dsh-exits-at-import 0.3) failed: entry point 'exiter' in group "
                "'dsh.bash_env' (exits_at_import:contributor, from dsh-exits-at-import 0.3) failed to load: "
                "SystemExit: 4"
            ) in warnings
            assert any("'bash-env:interrupter'" in w and "KeyboardInterrupt" in w for w in warnings), warnings
        finally:
            runtime.close()
    finally:
        for name in ("exits_at_import", "interrupts_at_import"):
            sys.modules.pop(name, None)


def test_a_real_ctrl_c_still_interrupts_contained_code() -> None:
    def pressed() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)

    with pytest.raises(KeyboardInterrupt):
        contained(pressed)

    def raised() -> None:
        raise KeyboardInterrupt

    with pytest.raises(EscapedError, match=r"^KeyboardInterrupt$"):
        contained(raised)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_resolver_threads_are_reused(registry: BashEnvRegistry) -> None:
    for name in ("a", "b", "c"):
        registry.register(FunctionContributor(name, {f"DSH_{name.upper()}": "x"}, lambda e: {}))
    registry.collect(CALL)
    before = threading.active_count()

    async def many() -> None:
        await asyncio.gather(*(registry.collect_async(CALL) for _ in range(10)))

    for _ in range(20):
        registry.collect(CALL)
        asyncio.run(many())
    # At most THREADS_PER_CONTRIBUTOR threads per contributor, reused afterwards: a thread per
    # resolve would add 1,800.
    assert threading.active_count() <= before + 3 * THREADS_PER_CONTRIBUTOR
    for _ in range(200):
        registry.collect(CALL)
    assert threading.active_count() <= before + 3 * THREADS_PER_CONTRIBUTOR


class _SleepyItems(dict[str, str]):
    release: threading.Event

    def items(self):  # type: ignore[override]
        self.release.wait(30)
        return super().items()


class _ExitingItems(dict[str, str]):
    def items(self):  # type: ignore[override]
        raise SystemExit(0)


def test_reading_the_returned_mapping_is_under_the_deadline_and_contained(
    registry: BashEnvRegistry, release: threading.Event
) -> None:
    sleepy = _SleepyItems(DSH_SLEEPY="x")
    sleepy.release = release
    registry.register(FunctionContributor("sleepy", {"DSH_SLEEPY": "s"}, lambda e: sleepy))
    started = time.monotonic()
    with pytest.raises(CollectionError, match=r"^contributor 'sleepy' did not resolve within its 0\.2 s deadline"):
        registry.collect(CALL)
    assert time.monotonic() - started < 10
    release.set()


def test_a_mapping_that_exits_while_read_is_the_contributors_failure(registry: BashEnvRegistry) -> None:
    registry.register(FunctionContributor("exits", {"DSH_EXITS": "e"}, lambda e: _ExitingItems(DSH_EXITS="x")))
    with pytest.raises(CollectionError, match=r"^contributor 'exits' raised SystemExit while resolving"):
        registry.collect(CALL)
    with pytest.raises(CollectionError, match=r"^contributor 'exits' raised SystemExit while resolving"):
        asyncio.run(registry.collect_async(CALL))
    gc.collect()  # a failure left unretrieved on the loop would be logged (and upset CPython 3.11) here
    ast.parse("\n".join(f"def f{i}(): return [{i}]" for i in range(2000)))


def test_many_keys_cannot_add_up_past_the_snapshot_maximum(registry: BashEnvRegistry) -> None:
    keys = {f"DSH_MANY_{i}": "k" for i in range(12)}
    registry.register(FunctionContributor("many", keys, lambda e: dict.fromkeys(keys, "v" * (MAX_VALUE_BYTES - 64))))
    with pytest.raises(CollectionError, match=r"add up to \d+ characters; the maximum is 262144 \(largest: 'DSH_MANY_"):
        registry.collect(CALL)


def test_a_hanging_contributor_behind_a_failing_one_is_not_started_and_stays_bounded(
    registry: BashEnvRegistry,
) -> None:
    # Each call fails at the failing "a", and the hanging "b" beside it only ever holds its own
    # threads: at most THREADS_PER_CONTRIBUTOR of its resolves ever start (the others wait for a
    # thread and are cancelled when their call fails), and once those passed their deadline its
    # calls are refused at once.
    release = threading.Event()
    started: list[str] = []

    def fail(execution: ToolExecution) -> Mapping[str, str]:
        raise RuntimeError("broken")

    def hang(execution: ToolExecution) -> Mapping[str, str]:
        started.append(execution.call_id)
        release.wait(30)
        return {}

    registry.register(FunctionContributor("a", {"DSH_A": "x"}, fail))
    registry.register(FunctionContributor("b", {"DSH_B": "x"}, hang))
    before = threading.active_count()
    try:
        errors = set()
        for _ in range(THREADS_PER_CONTRIBUTOR + 20):
            with pytest.raises(CollectionError) as caught:
                registry.collect(CALL)
            errors.add(str(caught.value))
        own = "contributor 'a' raised RuntimeError while resolving: broken"
        assert errors - {own} <= {
            f"contributor 'b' is still running {n} resolve() calls that passed their 0.2 s deadline; "
            "this call fails without starting another"
            for n in range(THREADS_PER_CONTRIBUTOR, THREADS_PER_CONTRIBUTOR + 20)
        }, errors
        assert len(started) <= THREADS_PER_CONTRIBUTOR, f"b started for {len(started)} calls that had already failed"
        assert threading.active_count() <= before + THREADS_PER_CONTRIBUTOR + 4
    finally:
        release.set()


INSTALLS_SIGINT = """
import signal
SEEN = []


def own(signum, frame):
    SEEN.append(signum)
    raise KeyboardInterrupt


signal.signal(signal.SIGINT, own)


class C:
    name = "installs"
    variables = {"DSH_INSTALLS": "installs its own SIGINT handler at import"}

    def resolve(self, execution):
        return {}
"""

PRESSES_CTRL_C = """
import os, signal, time


def make():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
"""

RAISES_ITSELF = """
def make():
    raise KeyboardInterrupt
"""


@pytest.mark.parametrize("pressed", [False, True])
def test_a_contributor_installing_its_own_sigint_handler_during_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pressed: bool
) -> None:
    # One containment is held across the whole composition: the handler the first contributor
    # installs is wrapped in turn, so a real Ctrl-C while a later one loads still stops the boot
    # (through that handler), a later one's own KeyboardInterrupt fails only it, and the handler
    # stays the one the contributor installed, as it would with no containment at all.
    site = tmp_path / "site"
    later = ("b_presses", PRESSES_CTRL_C) if pressed else ("b_raises", RAISES_ITSELF)
    make_dist(
        site,
        "dsh-sigint-owner",
        "0.1",
        {BASH_ENV_GROUP: {"a-installs": "a_installs:C", "b-later": f"{later[0]}:make"}},
        {"a_installs": INSTALLS_SIGINT, later[0]: later[1]},
    )
    monkeypatch.syspath_prepend(str(site))
    saved = signal.getsignal(signal.SIGINT)
    try:
        if pressed:
            with pytest.raises(KeyboardInterrupt):
                harness(tmp_path, plugins=[{"id": "bash-env", "name": "bash-env"}])
            assert sys.modules["a_installs"].SEEN == [signal.SIGINT]
        else:
            runtime = harness(tmp_path, plugins=[{"id": "bash-env", "name": "bash-env"}])
            try:
                states = {f.label: f.state for f in runtime.fibers() if f.label.startswith("bash-env:")}
                assert states == {"bash-env:a-installs": FiberState.ACTIVE, "bash-env:b-later": FiberState.FAILED}
                assert any("'bash-env:b-later'" in w and "KeyboardInterrupt" in w for w in runtime.warnings())
            finally:
                runtime.close()
            assert sys.modules["a_installs"].SEEN == []
        assert signal.getsignal(signal.SIGINT) is sys.modules["a_installs"].own
    finally:
        signal.signal(signal.SIGINT, saved)
        for name in ("a_installs", later[0]):
            sys.modules.pop(name, None)
