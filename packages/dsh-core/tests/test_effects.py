from __future__ import annotations

import pytest

from dsh.core import Context, FiberState, Plugin, PluginError


def test_effects_dispose_in_reverse_order() -> None:
    root = Context.root()
    order: list[str] = []

    def apply(ctx: Context, config: None) -> None:
        for name in "ABC":
            ctx.effect(lambda name=name: lambda: order.append(name))  # type: ignore[misc]

    fiber = root.plugin(Plugin(name="p", apply=apply))
    assert fiber.state is FiberState.ACTIVE
    fiber.dispose()
    assert order == ["C", "B", "A"]
    assert fiber.state is FiberState.DISPOSED


def test_setup_that_raises_rolls_back_what_it_registered() -> None:
    ctx = Context.root()
    undone: list[str] = []

    def setup() -> None:
        ctx.effect(lambda: lambda: undone.append("inner"))
        ctx.provide("half", 1)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        ctx.effect(setup)
    assert undone == ["inner"]
    assert ctx.get("half") is None
    assert ctx.fiber.effects == ()


def test_disposer_is_idempotent() -> None:
    ctx = Context.root()
    calls: list[int] = []
    dispose = ctx.effect(lambda: lambda: calls.append(1))
    dispose()
    dispose()
    ctx.fiber.dispose()
    assert calls == [1]


def test_failing_disposer_is_reported_and_the_rest_still_run() -> None:
    root = Context.root()
    order: list[str] = []

    def bad() -> None:
        raise ValueError("cannot close")

    def apply(ctx: Context, config: None) -> None:
        ctx.effect(lambda: lambda: order.append("first"))
        ctx.effect(lambda: bad, label="bad effect")
        ctx.effect(lambda: lambda: order.append("last"))

    fiber = root.plugin(Plugin(name="p", apply=apply))
    fiber.dispose()
    assert order == ["last", "first"]
    assert fiber.dispose_errors == ["disposer of bad effect raised ValueError: cannot close"]


def test_apply_that_raises_fails_the_plugin_rolls_back_and_spares_siblings() -> None:
    root = Context.root()
    undone: list[str] = []

    def broken(ctx: Context, config: None) -> None:
        ctx.provide("partial", object())
        ctx.effect(lambda: lambda: undone.append("effect"))
        raise RuntimeError("apply exploded")

    sibling = root.plugin(Plugin(name="sibling", apply=lambda ctx, cfg: ctx.provide("ok", 1)))
    failed = root.plugin(Plugin(name="broken", apply=broken))
    assert failed.state is FiberState.FAILED
    assert failed.error == "apply raised RuntimeError: apply exploded"
    assert undone == ["effect"]
    assert root.get("partial") is None
    assert sibling.state is FiberState.ACTIVE
    assert root.get("ok") == 1


def test_disposing_a_parent_disposes_children_first() -> None:
    root = Context.root()
    order: list[str] = []

    def child(ctx: Context, config: None) -> None:
        ctx.effect(lambda: lambda: order.append("child"))

    def parent(ctx: Context, config: None) -> None:
        ctx.effect(lambda: lambda: order.append("parent-before"), label="before")
        ctx.plugin(Plugin(name="child", apply=child))
        ctx.effect(lambda: lambda: order.append("parent-after"), label="after")

    fiber = root.plugin(Plugin(name="parent", apply=parent))
    (kid,) = fiber.children
    assert [e.label for e in fiber.effects] == ["before", "plugin child", "after"]
    assert [e.child for e in fiber.effects] == [None, kid, None]
    fiber.dispose()
    assert order == ["child", "parent-after", "parent-before"]
    assert fiber.children == []
    assert kid.state is FiberState.DISPOSED


def test_disposed_fiber_cannot_register() -> None:
    root = Context.root()
    fiber = root.plugin(Plugin(name="p", apply=lambda ctx, cfg: None))
    ctx = fiber.context
    fiber.dispose()
    with pytest.raises(PluginError, match="'p' is disposed"):
        ctx.effect(lambda: None)


def test_malformed_plugin_fails_its_fiber_only() -> None:
    root = Context.root()

    class NoApply:
        name = "no-apply"

    fiber = root.plugin(NoApply())
    assert fiber.state is FiberState.FAILED
    assert fiber.error == "plugin 'no-apply' has no callable 'apply'"
    nameless = root.plugin(object())
    assert nameless.state is FiberState.FAILED
    assert "no non-blank string 'name'" in (nameless.error or "")
