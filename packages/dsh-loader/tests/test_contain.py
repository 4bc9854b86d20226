"""Containment with one signal watch for many calls: nested calls and batches keep every guarantee.

Real signals, sent to this process with ``os.kill``: a real one propagates out of every level, one a
plugin raises itself is that plugin's failure only, and the handlers end exactly as plugin code left
them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

from dsh.core import EscapedError, FiberState, Plugin, describe
from dsh.loader import contained, containment
from dsh.loader import root as kernel_root


class Stop(BaseException):
    """What a host's own SIGTERM handler raises (as dsh's ``Interrupted`` does)."""


def _press(sig: int = signal.SIGINT) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(5)  # the handler runs at once and raises; the sleep only bounds a missed signal


def _raise(exc: BaseException) -> Callable[[], None]:
    def call() -> None:
        raise exc

    return call


@pytest.fixture(autouse=True)
def handlers() -> Iterator[dict[int, Any]]:
    """The handlers before the test, put back after it whatever the test left."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield saved
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_a_real_signal_in_a_nested_call_propagates_out_of_every_level(handlers: dict[int, Any]) -> None:
    reached: list[str] = []

    def outer() -> None:
        contained(lambda: reached.append("first inner"))
        contained(_press)
        reached.append("after the signal")  # pragma: no cover - must not run

    with pytest.raises(KeyboardInterrupt):
        contained(outer)
    assert reached == ["first inner"]
    assert signal.getsignal(signal.SIGINT) is handlers[signal.SIGINT]


def test_a_real_sigterm_in_a_batch_propagates_what_the_hosts_handler_raises(handlers: dict[int, Any]) -> None:
    def host(signum: int, frame: FrameType | None) -> None:
        raise Stop

    def batch() -> None:
        with containment():
            contained(lambda: None)
            contained(lambda: contained(lambda: _press(signal.SIGTERM)))

    signal.signal(signal.SIGTERM, host)
    with pytest.raises(Stop):
        batch()
    assert signal.getsignal(signal.SIGTERM) is host
    assert signal.getsignal(signal.SIGINT) is handlers[signal.SIGINT]


def test_a_plugins_own_base_exception_in_a_nested_call_fails_only_that_call() -> None:
    def outer() -> str:
        for exc in (KeyboardInterrupt(), SystemExit(3), GeneratorExit()):
            with pytest.raises(EscapedError) as caught:
                contained(_raise(exc))
            assert caught.value.original is exc
        return "outer went on"

    with containment():
        assert contained(outer) == "outer went on"


def test_a_signal_in_an_earlier_call_of_a_batch_does_not_pass_a_later_calls_own_interrupt() -> None:
    def swallows() -> None:
        # Third-party code may swallow a real Ctrl-C: that call then simply returns.
        with contextlib.suppress(KeyboardInterrupt):
            _press()

    with containment():
        contained(swallows)
        with pytest.raises(EscapedError, match=r"^KeyboardInterrupt$"):
            contained(_raise(KeyboardInterrupt()))


def test_a_plugin_that_installs_its_own_sigint_handler_in_a_batch(handlers: dict[int, Any]) -> None:
    calls: list[int] = []

    def own(signum: int, frame: FrameType | None) -> None:
        calls.append(signum)
        raise KeyboardInterrupt

    root = kernel_root()
    installer = Plugin(name="installer", apply=lambda ctx, cfg: signal.signal(signal.SIGINT, own))
    with containment():
        assert root.plugin(installer).state is FiberState.ACTIVE
        # A later plugin's own KeyboardInterrupt is still its failure alone...
        failed = root.plugin(Plugin(name="raises", apply=lambda ctx, cfg: _raise(KeyboardInterrupt())()))
        assert failed.state is FiberState.FAILED and failed.error == "apply raised KeyboardInterrupt"
        assert calls == []
        # ...and a real Ctrl-C while a later plugin runs still stops everything, through the
        # handler the first plugin installed.
        with pytest.raises(KeyboardInterrupt):
            root.plugin(Plugin(name="pressed", apply=lambda ctx, cfg: _press()))
        assert calls == [signal.SIGINT]
    # The handler is the one the plugin installed, as it would be with no containment at all.
    assert signal.getsignal(signal.SIGINT) is own
    assert signal.getsignal(signal.SIGTERM) is handlers[signal.SIGTERM]


def test_a_plugin_handler_that_chains_to_the_one_it_replaced(handlers: dict[int, Any]) -> None:
    calls: list[int] = []
    chained: list[Any] = []

    def chaining(signum: int, frame: FrameType | None) -> Any:
        calls.append(signum)
        return chained[0](signum, frame)  # the handler it found installed: the watch's own

    def installs() -> None:
        chained.append(signal.signal(signal.SIGINT, chaining))

    with containment():
        contained(installs)
        # The watch wraps the chaining handler in turn: a real Ctrl-C runs each handler once,
        # ends in the original one, and is noticed (no endless chain back and forth).
        with pytest.raises(KeyboardInterrupt):
            contained(lambda: contained(_press))
        assert calls == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is chaining
    with pytest.raises(KeyboardInterrupt):
        _press()  # after the batch too, through the chain, to the original handler
    assert calls == [signal.SIGINT, signal.SIGINT]


def test_a_plugin_that_ignores_sigint_in_a_batch_leaves_it_ignored() -> None:
    with containment():
        contained(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        with pytest.raises(EscapedError, match=r"^KeyboardInterrupt$"):
            contained(_raise(KeyboardInterrupt()))
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_handler_the_plugin_restores_itself_is_given_back(handlers: dict[int, Any]) -> None:
    saved: list[Any] = []

    def borrows() -> None:
        saved.append(signal.signal(signal.SIGINT, signal.SIG_IGN))
        signal.signal(signal.SIGINT, saved[0])

    with containment():
        contained(borrows)
        with pytest.raises(KeyboardInterrupt):
            contained(_press)
    assert signal.getsignal(signal.SIGINT) is handlers[signal.SIGINT]


def test_calls_on_a_worker_thread_contain_everything_and_touch_no_handler(handlers: dict[int, Any]) -> None:
    seen: list[object] = []

    def worker() -> None:
        try:
            contained(_raise(KeyboardInterrupt()))
        except EscapedError as exc:
            seen.append(exc.original)
        seen.append(signal.getsignal(signal.SIGINT))

    with containment():
        watching = signal.getsignal(signal.SIGINT)
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert isinstance(seen[0], KeyboardInterrupt)
    assert seen[1] is watching
    assert signal.getsignal(signal.SIGINT) is handlers[signal.SIGINT]


def test_a_batch_on_a_worker_thread_watches_nothing(handlers: dict[int, Any]) -> None:
    seen: list[object] = []

    def worker() -> None:
        with containment():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [handlers[signal.SIGINT]]


class _Saves:
    """The usual idiom: ``apply`` chains its SIGINT handler to the one it replaced, ``dispose`` restores that."""

    def __init__(self) -> None:
        self.saved: Any = None

    def apply(self) -> None:
        self.saved = signal.signal(signal.SIGINT, lambda signum, frame: self.saved(signum, frame))

    def dispose(self) -> None:
        signal.signal(signal.SIGINT, self.saved)


def _layers(handler: Any, original: Any) -> int:
    """How many handlers a signal goes through before ``original`` (following what each one was given)."""
    depth = 0
    while handler is not original:
        nxt = getattr(handler, "wraps", None)
        if nxt is None:  # the plugin's lambda: follow the handler it saved
            nxt = handler.__closure__[0].cell_contents.saved
        handler, depth = nxt, depth + 1
    return depth


def test_a_plugin_that_saves_and_restores_a_handler_across_many_reloads(handlers: dict[int, Any]) -> None:
    # The handler a plugin saved is a watch's wrapper; restored after that watch ended, the next
    # watch must look through it, or every reload would add one layer (RecursionError on Ctrl-C).
    plugin = _Saves()
    with containment():
        contained(plugin.apply)
    for _ in range(1200):  # a `dsh serve` refreshing an upgraded plugin, each refresh one composition
        with containment():
            contained(plugin.dispose)
            contained(plugin.apply)
    with pytest.raises(KeyboardInterrupt):
        _press()
    with pytest.raises(KeyboardInterrupt):  # and inside a watch too
        contained(_press)
    # The plugin's handler, then the wrapper it saved (of a watch that ended), then the original.
    assert _layers(signal.getsignal(signal.SIGINT), handlers[signal.SIGINT]) == 2
    with containment():
        contained(plugin.dispose)
    assert signal.getsignal(signal.SIGINT) is handlers[signal.SIGINT]


def test_a_stale_wrapper_restored_in_an_outermost_call_is_looked_through(handlers: dict[int, Any]) -> None:
    plugin = _Saves()
    contained(plugin.apply)
    for _ in range(3):  # each call its own watch, no block around them
        contained(plugin.dispose)
        assert signal.getsignal(signal.SIGINT) is handlers[signal.SIGINT]
        contained(plugin.apply)
    contained(plugin.dispose)
    assert signal.getsignal(signal.SIGINT) is handlers[signal.SIGINT]


class _Unprintable(BaseException):
    def __str__(self) -> str:
        raise RuntimeError("str broken")


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise _Unprintable


def test_an_exception_whose_str_raises_is_contained_and_described() -> None:
    with pytest.raises(EscapedError) as caught:
        contained(_raise(_Unprintable()))
    assert str(caught.value) == "_Unprintable (its message could not be read: RuntimeError: str broken)"
    assert isinstance(caught.value.original, _Unprintable)
    # An ordinary exception propagates unchanged; describe() names it, and the one its __str__
    # raised, whose own __str__ raises too.
    with pytest.raises(_UnprintableError) as plain:
        contained(_raise(_UnprintableError()))
    assert describe(plain.value) == "_UnprintableError (its message could not be read: _Unprintable)"


def test_describe_never_raises_even_for_an_absurd_exception_type() -> None:
    class Meta(type):
        @property
        def __name__(cls) -> str:  # type: ignore[override]
            raise RuntimeError("name broken")

    class EvilName(Exception, metaclass=Meta):
        pass

    assert describe(EvilName()) == "<an exception whose type cannot be read>"
