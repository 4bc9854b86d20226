"""One fiber per entry point of a group, kept in step with installs and uninstalls."""

from __future__ import annotations

from collections.abc import Callable, Collection

from dsh.core import Context, Fiber, Plugin

from ._discovery import Catalog, EntryPointItem, GroupDiff, first_installed
from ._errors import DiscoveryError
from ._runtime import CATALOG


def _conflict_plugin(group: str, name: str, label: str, message: str) -> Plugin:
    def apply(ctx: Context, config: None) -> None:
        raise DiscoveryError(message, group=group, name=name)

    return Plugin(name=label, apply=apply)


def follow_group(
    ctx: Context,
    group: str,
    make_plugin: Callable[[EntryPointItem], Plugin],
    *,
    label: str,
    exclude: Collection[str] = (),
) -> None:
    """Load every item of ``group`` as a child fiber of ``ctx``, labelled ``<label>:<name>``, and follow refreshes.

    Each fiber is non-essential (a failure is a warning of the runtime, not a boot failure) and
    attributed to its item. Items load in install order, first installed first, so where two claim
    one thing (a bash-env key) the one installed first has it. On :meth:`Catalog.refresh` removed
    items' fibers are disposed, changed ones reloaded and added ones loaded. Of a name two
    distributions claim, the one installed first loads; the other is a failed fiber
    ``<label>:<name> (<distribution>)`` naming both. Everything is undone when ``ctx``'s fiber unloads.
    """
    catalog = ctx.get(CATALOG) or Catalog()
    fibers: dict[str, Fiber] = {}
    losers: dict[tuple[str, str], Fiber] = {}

    def load(item: EntryPointItem) -> None:
        if item.name not in exclude:
            fibers[item.name] = ctx.plugin(
                make_plugin(item), label=f"{label}:{item.name}", origin=item, essential=False
            )

    def unload(name: str) -> None:
        fiber = fibers.pop(name, None)
        if fiber is not None:
            fiber.dispose()

    def report_lost() -> None:
        now = {(loss.item.name, loss.item.distribution): loss for loss in catalog.lost(group)}
        for key in [k for k in losers if k not in now]:
            losers.pop(key).dispose()
        for key, loss in now.items():
            if key not in losers and loss.item.name not in exclude:
                child = f"{label}:{loss.item.name} ({loss.item.distribution})"
                failing = _conflict_plugin(group, loss.item.name, child, loss.message)
                losers[key] = ctx.plugin(failing, label=child, origin=loss.item, essential=False)

    for item in first_installed(catalog.items(group)):
        load(item)
    report_lost()

    def on_diff(diff: GroupDiff) -> None:
        for item in (*diff.removed, *diff.changed, *diff.added):
            unload(item.name)
        for item in first_installed((*diff.changed, *diff.added)):
            load(item)
        report_lost()

    ctx.effect(lambda: catalog.watch(group, on_diff), label=f"watch {group}")
