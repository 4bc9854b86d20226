from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import dsh.loader
from dsh.core import FiberState
from dsh.loader import PLUGINS_GROUP, Catalog, DiscoveryError, GroupDiff
from dsh.testing import make_dist, remove_dist, touch_dir

PLUGIN_SRC = """
from dsh.core import Plugin
plugin = Plugin(name="{name}", apply=lambda ctx, cfg: ctx.provide("{name}-svc", "{version}"))
"""


def test_load_failure_names_the_entry_point_and_distribution(site: Path) -> None:
    make_dist(
        site,
        "broken-dist",
        "0.1",
        {PLUGINS_GROUP: {"broken": "broken_mod:plugin"}},
        {"broken_mod": "raise ImportError('no deps')\n"},
    )
    item = Catalog().find(PLUGINS_GROUP, "broken")
    with pytest.raises(DiscoveryError, match=r"'broken'.*broken-dist 0.1.*no deps"):
        item.load()


def test_refresh_sees_install_uninstall_and_change(site: Path) -> None:
    catalog = Catalog()
    diffs: list[GroupDiff] = []
    catalog.watch(PLUGINS_GROUP, diffs.append)
    assert catalog.refresh() == []

    info = make_dist(
        site,
        "late",
        "1.0",
        {PLUGINS_GROUP: {"late": "late_mod:plugin"}},
        {"late_mod": PLUGIN_SRC.format(name="late", version="1.0")},
    )
    touch_dir(site)
    (diff,) = catalog.refresh()
    assert [i.name for i in diff.added] == ["late"] and diffs == [diff]

    remove_dist(info)
    make_dist(site, "late", "2.0", {PLUGINS_GROUP: {"late": "late_mod:plugin"}})
    touch_dir(site)
    (diff,) = catalog.refresh()
    assert [(i.name, i.version) for i in diff.changed] == [("late", "2.0")]

    remove_dist(info.parent / "late-2.0.dist-info", ("late_mod",))
    touch_dir(site)
    (diff,) = catalog.refresh()
    assert [i.name for i in diff.removed] == ["late"]
    assert catalog.refresh() == []


def test_refresh_without_change_is_cheap_and_empty(site: Path) -> None:
    catalog = Catalog()
    start = time.perf_counter()
    for _ in range(100):
        assert catalog.refresh() == []
    # Not a benchmark: only a guard that the fingerprint path does not rescan every time.
    assert time.perf_counter() - start < 1.0


def test_a_write_that_is_not_an_install_does_not_rescan(site: Path) -> None:
    # A sys.path entry such as the working directory or /tmp changes its mtime all the time.
    info = make_dist(site, "quiet", "1.0", {PLUGINS_GROUP: {"quiet": "quiet_mod:plugin"}})
    catalog = Catalog()
    # An in-place edit is seen only by a rescan: it proves whether one happened.
    (info / "entry_points.txt").write_text(f"[{PLUGINS_GROUP}]\nquiet = other_mod:plugin\n")
    (site / "scratch.txt").write_text("not a distribution")
    touch_dir(site)
    assert catalog.refresh() == []
    assert catalog.find(PLUGINS_GROUP, "quiet").value == "quiet_mod:plugin"
    (diff,) = catalog.refresh(force=True)
    assert [i.value for i in diff.changed] == ["other_mod:plugin"]


def test_plugin_from_entry_point_runs_in_a_fiber_with_its_origin(site: Path) -> None:
    make_dist(
        site,
        "svc-dist",
        "4.2",
        {PLUGINS_GROUP: {"svc": "svc_mod:plugin"}},
        {"svc_mod": PLUGIN_SRC.format(name="svc", version="4.2")},
    )
    item = Catalog().find(PLUGINS_GROUP, "svc")
    root = dsh.loader.root()
    fiber = root.plugin(item.load(), origin=item)
    assert fiber.state is FiberState.ACTIVE
    assert fiber.origin is not None and fiber.origin.distribution == "svc-dist"
    assert root.get("svc-svc") == "4.2"
    sys.modules.pop("svc_mod", None)


def test_an_unchanged_refresh_stats_each_search_path_entry_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``dsh serve`` refreshes at every turn: with nothing installed since, that is one stat per entry."""
    import os

    catalog = Catalog()
    calls: list[object] = []
    real_stat = os.stat

    def counting(path: object, *args: object, **kwargs: object) -> os.stat_result:
        calls.append(path)
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counting)
    assert catalog.refresh() == []
    assert len(calls) == len(sys.path), calls


def test_moved_says_whether_a_refresh_would_rescan(site: Path) -> None:
    catalog = Catalog()
    assert not catalog.moved()
    make_dist(site, "mover", "1.0", {PLUGINS_GROUP: {"mover": "mover_mod:plugin"}})
    touch_dir(site)
    assert catalog.moved()
    (diff,) = catalog.refresh()
    assert [i.name for i in diff.added] == ["mover"]
    assert not catalog.moved()


def test_a_runtime_arms_its_signal_watch_only_for_a_refresh_that_runs_plugin_code(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dsh serve`` refreshes at every turn: with nothing installed since, no handler is wrapped and given back."""
    import signal

    from dsh.loader import Deployment, compose
    from dsh.paths import signals

    installed: list[int] = []
    real_install = signals.install

    def counting(signum: int, handler: signals.Handler) -> signals.Handler:
        installed.append(signum)
        return real_install(signum, handler)

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # a callable handler: one a watch wraps
    try:
        with compose(Deployment(plugins=()), env={"DSH_HOME": str(home)}) as runtime:
            monkeypatch.setattr(signals, "install", counting)
            assert runtime.refresh() == []
            assert installed == []
            make_dist(site, "armed", "1.0", {PLUGINS_GROUP: {"armed": "armed_mod:plugin"}})
            touch_dir(site)
            assert [d.group for d in runtime.refresh()] == [PLUGINS_GROUP]
            assert signal.SIGTERM in installed  # wrapped for the diffs' plugin code, then given back
    finally:
        signal.signal(signal.SIGTERM, previous)
