from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from dsh.bash_env import BASH_ENV_GROUP
from dsh.core import Context, FiberState
from dsh.loader import PLUGINS_GROUP, Catalog, DiscoveryError, GroupDiff
from tests.helpers import make_dist, remove_dist, touch_dir

PLUGIN_SRC = """
from dsh.core import Plugin
plugin = Plugin(name="{name}", apply=lambda ctx, cfg: ctx.provide("{name}-svc", "{version}"))
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    return path


def test_items_are_attributed_sorted_and_loadable(site: Path) -> None:
    make_dist(
        site,
        "acme-b",
        "2.0",
        {PLUGINS_GROUP: {"zeta": "acme_b:plugin"}},
        {"acme_b": PLUGIN_SRC.format(name="zeta", version="2.0")},
    )
    make_dist(
        site,
        "acme-a",
        "1.5",
        {PLUGINS_GROUP: {"alpha": "acme_a:plugin"}},
        {"acme_a": PLUGIN_SRC.format(name="alpha", version="1.5")},
    )
    catalog = Catalog()
    ours = [i for i in catalog.items(PLUGINS_GROUP) if i.distribution.startswith("acme-")]
    assert [(i.name, i.distribution, i.version) for i in ours] == [
        ("alpha", "acme-a", "1.5"),
        ("zeta", "acme-b", "2.0"),
    ]
    assert ours[0].load().name == "alpha"
    # The project's own plugins are found with their distribution too.
    bash_env = catalog.find(PLUGINS_GROUP, "bash-env")
    assert bash_env.distribution == "dsh-bash-env"


def test_two_distributions_claiming_one_name_is_one_error_naming_both(site: Path) -> None:
    make_dist(site, "first-dist", "1.0", {BASH_ENV_GROUP: {"region": "first:c"}})
    make_dist(site, "second-dist", "3.1", {BASH_ENV_GROUP: {"region": "second:c"}})
    catalog = Catalog()
    assert "region" not in [i.name for i in catalog.items(BASH_ENV_GROUP)]
    message = catalog.conflicts(BASH_ENV_GROUP)["region"]
    assert "first-dist 1.0" in message and "second-dist 3.1" in message
    with pytest.raises(DiscoveryError, match="claimed by two distributions"):
        catalog.find(BASH_ENV_GROUP, "region")


def test_unknown_name_lists_available(site: Path) -> None:
    with pytest.raises(DiscoveryError) as err:
        Catalog().find(PLUGINS_GROUP, "nope")
    assert "no entry point 'nope'" in str(err.value) and "bash-env" in str(err.value) and "tool-bash" in str(err.value)


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
    root = Context.root()
    fiber = root.plugin(item.load(), origin=item)
    assert fiber.state is FiberState.ACTIVE
    assert fiber.origin is not None and fiber.origin.distribution == "svc-dist"
    assert root.get("svc-svc") == "4.2"
    sys.modules.pop("svc_mod", None)


def test_uninstalled_deployment_entry_is_disposed_on_refresh(site: Path, tmp_path: Path) -> None:
    from dsh.loader import boot, parse_deployment

    info = make_dist(
        site,
        "svc2-dist",
        "1.0",
        {PLUGINS_GROUP: {"svc2": "svc2_mod:plugin"}},
        {"svc2_mod": PLUGIN_SRC.format(name="svc2", version="1.0")},
    )
    runtime = boot(parse_deployment({"dsh_home": str(tmp_path / "h"), "plugins": [{"id": "s", "name": "svc2"}]}))
    try:
        assert runtime.ctx.get("svc2-svc") == "1.0"
        remove_dist(info, ("svc2_mod",))
        touch_dir(site)
        runtime.refresh()
        assert runtime.entries["s"].state is FiberState.DISPOSED
        assert runtime.entries["s"].error == "distribution svc2-dist 1.0 was uninstalled"
        assert runtime.ctx.get("svc2-svc") is None
    finally:
        runtime.close()
        sys.modules.pop("svc2_mod", None)
