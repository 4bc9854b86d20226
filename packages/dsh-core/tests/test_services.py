from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from dsh.core import (
    Context,
    Disposer,
    FiberState,
    Plugin,
    PluginError,
    RegistrationConflictError,
    Registry,
    Service,
    ServiceConflictError,
    ServiceKey,
)

DB: ServiceKey[str] = ServiceKey("db")


def _provider(value: str) -> Plugin:
    return Plugin(name=f"provider-{value}", apply=lambda ctx, cfg: ctx.provide(DB, value))


def test_dependent_waits_restarts_and_returns_to_pending() -> None:
    root = Context.root()
    seen: list[str | None] = []
    stopped: list[str] = []

    def apply(ctx: Context, config: None) -> None:
        seen.append(ctx.get(DB))
        ctx.effect(lambda: lambda: stopped.append("stop"))

    dependent = root.plugin(Plugin(name="dep", apply=apply, inject=(DB,)))
    assert dependent.state is FiberState.PENDING
    assert dependent.missing == ["db"]
    assert seen == []

    first = root.plugin(_provider("one"))
    assert dependent.state is FiberState.ACTIVE
    assert seen == ["one"]

    # Replacing the provider restarts the dependent against the new one.
    first.reload(_provider("two"))
    assert seen == ["one", "two"]
    assert stopped == ["stop"]
    assert dependent.state is FiberState.ACTIVE

    first.dispose()
    assert dependent.state is FiberState.PENDING
    assert stopped == ["stop", "stop"]
    assert root.get(DB) is None


def test_get_is_none_while_provider_inactive() -> None:
    root = Context.root()
    fiber = root.plugin(_provider("x"))
    assert root.get(DB) == "x"
    assert root.get("db") == "x"
    fiber.dispose()
    assert root.get(DB) is None


def test_duplicate_provider_fails_loudly_naming_both() -> None:
    root = Context.root()
    root.plugin(_provider("a"))
    second = root.plugin(_provider("b"))
    assert second.state is FiberState.FAILED
    assert "service 'db' is already provided by plugin 'provider-a'" in (second.error or "")
    with pytest.raises(ServiceConflictError):
        root.provide(DB, "c")


def test_a_config_goes_to_the_root_s_validator_and_its_result_reaches_apply() -> None:
    """The kernel names no validation library: it hands a non-empty config to the ``validate`` of its root."""

    @dataclass(frozen=True)
    class Config:
        port: int = 80

    asked: list[tuple[str, type, object]] = []

    def validate(name: str, config_cls: type[Any], raw: object) -> Any:
        asked.append((name, config_cls, raw))
        if raw == {"port": "many"}:
            raise PluginError(f"plugin '{name}' has invalid config: field 'config.port' must be a whole number")
        return config_cls(port=int(raw["port"]))  # type: ignore[index]

    got: list[int] = []
    root = Context.root(validate=validate)
    plugin = Plugin(name="server", apply=lambda ctx, cfg: got.append(cfg.port), Config=Config)
    assert root.plugin(plugin, {"port": "8080"}).state is FiberState.ACTIVE
    assert (got, asked) == ([8080], [("server", Config, {"port": "8080"})])
    failed = root.plugin(plugin, {"port": "many"})
    assert (failed.state, failed.error) == (
        FiberState.FAILED,
        "plugin 'server' has invalid config: field 'config.port' must be a whole number",
    )
    # An empty config and a Config instance built in code need no validator.
    assert Context.root().plugin(plugin).state is FiberState.ACTIVE
    assert Context.root().plugin(plugin, Config(port=1)).state is FiberState.ACTIVE
    assert got[-2:] == [80, 1]


def test_without_a_validator_a_config_to_validate_fails_the_fiber_saying_so() -> None:
    @dataclass(frozen=True)
    class Config:
        port: int = 80

    fiber = Context.root().plugin(Plugin(name="server", apply=lambda ctx, cfg: None, Config=Config), {"port": 1})
    assert fiber.state is FiberState.FAILED
    assert fiber.error == (
        "plugin 'server' has a config to validate, but its kernel has no config validator; "
        "make the root with dsh.loader.root() or Context.root(validate=...)"
    )


def test_a_guard_runs_every_call_of_plugin_code() -> None:
    """``guard`` runs apply and disposers (dsh-loader's containment is one); without one a
    ``BaseException`` that is no ``Exception`` propagates to the host."""
    ran: list[str] = []

    def guard(call: Callable[[], Any]) -> Any:
        ran.append("guarded")
        try:
            return call()
        except SystemExit as exc:
            raise RuntimeError(f"contained SystemExit {exc.code}") from exc

    def exits(ctx: Context, cfg: object) -> None:
        ctx.effect(lambda: lambda: ran.append("disposed"), label="probe")
        raise SystemExit(3)

    fiber = Context.root(guard=guard).plugin(Plugin(name="exits", apply=exits))
    assert (fiber.state, fiber.error) == (FiberState.FAILED, "apply raised RuntimeError: contained SystemExit 3")
    assert ran == ["guarded", "guarded", "disposed"]  # apply, then the rolled-back effect's disposer
    with pytest.raises(SystemExit):
        Context.root().plugin(Plugin(name="exits", apply=exits))


class _Registry(Service):
    """A caller-bound service: each view registers on its caller's fiber."""

    def __init__(self, items: list[str]) -> None:
        self.items = items

    def add(self, item: str) -> None:
        def setup() -> Disposer:
            self.items.append(item)
            return lambda: self.items.remove(item)

        self.effect(setup, label=f"item {item}")


def test_registry_methods_attach_effects_to_the_calling_plugin() -> None:
    root = Context.root()
    items: list[str] = []
    REG: ServiceKey[_Registry] = ServiceKey("reg")
    root.plugin(Plugin(name="owner", apply=lambda ctx, cfg: ctx.provide(REG, _Registry(items))))
    caller = root.plugin(Plugin(name="caller", apply=lambda ctx, cfg: ctx.require(REG).add("x"), inject=(REG,)))
    other = root.plugin(Plugin(name="other", apply=lambda ctx, cfg: ctx.require(REG).add("y"), inject=(REG,)))
    assert items == ["x", "y"]
    assert [e.label for e in caller.effects] == ["item x"]
    caller.dispose()
    assert items == ["y"]
    assert other.state is FiberState.ACTIVE


class _Names(Service):
    """A keyed registry service, as the tool and skill registries are."""

    def __init__(self) -> None:
        self.names: Registry[int] = Registry("widget")

    def add(self, name: str, value: int) -> Disposer:
        return self.register_keyed(self.names, name, value)


NAMES: ServiceKey[_Names] = ServiceKey("names")


def _adder(plugin: str, *entries: tuple[str, int]) -> Plugin:
    def apply(ctx: Context, config: None) -> None:
        for name, value in entries:
            ctx.require(NAMES).add(name, value)

    return Plugin(name=plugin, apply=apply, inject=(NAMES,))


def test_keyed_registration_belongs_to_the_caller_and_a_duplicate_names_both_plugins() -> None:
    root = Context.root()
    service = _Names()
    root.plugin(Plugin(name="host", apply=lambda ctx, cfg: ctx.provide(NAMES, service)))
    first = root.plugin(_adder("first", ("b", 2), ("a", 1)))
    assert list(service.names) == ["a", "b"] and service.names.values() == [1, 2]
    assert service.names.owner("a") == "first"
    assert [e.label for e in first.effects] == ["widget b", "widget a"]

    # The second plugin's own earlier entry is rolled back with it; the first keeps its entries.
    second = root.plugin(_adder("second", ("c", 3), ("a", 9)))
    assert second.state is FiberState.FAILED
    assert "widget 'a' is already registered by plugin 'first'; plugin 'second' cannot register it too" in (
        second.error or ""
    )
    assert list(service.names) == ["a", "b"] and service.names.get("a") == 1

    first.dispose()
    assert len(service.names) == 0 and "a" not in service.names
    third = root.plugin(_adder("third", ("a", 3)))
    assert third.state is FiberState.ACTIVE and service.names.owner("a") == "third"


def test_keyed_conflict_error_carries_its_subject() -> None:
    service = _Names()
    dispose = service.add("a", 1)  # no caller: the host's own registration
    with pytest.raises(RegistrationConflictError) as err:
        service.add("a", 2)
    assert (err.value.kind, err.value.key, err.value.owner, err.value.plugin) == ("widget", "a", None, None)
    assert str(err.value) == "widget 'a' is already registered by the host; the host cannot register it too"
    dispose()
    dispose()  # idempotent
    service.add("a", 3)
    assert service.names.get("a") == 3


def test_a_stale_disposer_never_removes_a_later_registration() -> None:
    service = _Names()
    old = service.add("a", 1)
    old()
    service.add("a", 2)
    old()
    assert service.names.get("a") == 2


def test_a_named_tuple_config_needs_no_validator_when_empty() -> None:
    code = """
from typing import NamedTuple
from dsh.core import Context, FiberState, Plugin

class Config(NamedTuple):
    port: int = 80

class Needs(NamedTuple):
    path: str

got = []
root = Context.root()
assert root.plugin(Plugin(name="p", apply=lambda ctx, cfg: got.append(cfg), Config=Config)).state is FiberState.ACTIVE
built = Plugin(name="q", apply=lambda ctx, cfg: got.append(cfg), Config=Config)
assert root.plugin(built, Config(1)).state is FiberState.ACTIVE
assert got == [Config(80), Config(1)], got
needs = root.plugin(Plugin(name="n", apply=lambda ctx, cfg: None, Config=Needs), {})
assert needs.state is FiberState.FAILED and "has a config to validate" in needs.error, needs.error  # a required field
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
