"""One fiber per entry point of a group, kept in step with installs and uninstalls."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from dsh.core import Context, Fiber, Plugin

from ._discovery import Catalog, EntryPointItem
from ._errors import DiscoveryError
from ._runtime import CATALOG

if TYPE_CHECKING:
    from ._diff import GroupDiff


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
    attributed to its item. On :meth:`Catalog.refresh` removed items' fibers are disposed,
    changed ones reloaded and added ones loaded; a name two distributions claim loads for
    neither, as a failed fiber naming both. Everything is undone when ``ctx``'s fiber unloads.
    """
    catalog = ctx.get(CATALOG) or Catalog()
    fibers: dict[str, Fiber] = {}

    def load(item: EntryPointItem) -> None:
        if item.name not in exclude:
            fibers[item.name] = ctx.plugin(
                make_plugin(item), label=f"{label}:{item.name}", origin=item, essential=False
            )

    def unload(name: str) -> None:
        fiber = fibers.pop(name, None)
        if fiber is not None:
            fiber.dispose()

    def report_conflicts() -> None:
        for name, message in catalog.conflicts(group).items():
            if name not in fibers:
                child = f"{label}:{name}"
                fibers[name] = ctx.plugin(_conflict_plugin(group, name, child, message), label=child, essential=False)

    for item in catalog.items(group):
        load(item)
    report_conflicts()

    def on_diff(diff: GroupDiff) -> None:
        for item in (*diff.removed, *diff.changed, *diff.added):
            unload(item.name)  # an added name may replace a conflict's failed fiber
        for item in (*diff.changed, *diff.added):
            load(item)
        report_conflicts()

    ctx.effect(lambda: catalog.watch(group, on_diff), label=f"watch {group}")
