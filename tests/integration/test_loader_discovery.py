from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dsh.bash_env import BASH_ENV_GROUP
from dsh.cli_fast._memos import EntryPointFile
from dsh.loader import PLUGINS_GROUP, Catalog, DiscoveryError
from tests.helpers import make_dist

PLUGIN_SRC = """
from dsh.core import Plugin
plugin = Plugin(name="{name}", apply=lambda ctx, cfg: ctx.provide("{name}-svc", "{version}"))
"""


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


def _installed(info: Path, when: int) -> None:
    """Date a distribution's install (its metadata directory's modification time), seconds from now."""
    stamp = time.time_ns() + when * 1_000_000_000
    os.utime(info, ns=(stamp, stamp))


@pytest.mark.parametrize("first", ["first-dist", "second-dist"])
def test_of_two_distributions_claiming_one_name_the_first_installed_keeps_it(site: Path, first: str) -> None:
    # Both used to lose ("claimed by two distributions"); now the one installed first loads, whatever
    # the names, and the other is left out with a message naming both.
    one = make_dist(site, "first-dist", "1.0", {BASH_ENV_GROUP: {"region": "first:c"}})
    two = make_dist(site, "second-dist", "3.1", {BASH_ENV_GROUP: {"region": "second:c"}})
    _installed(one, -100 if first == "first-dist" else -50)
    _installed(two, -50 if first == "first-dist" else -100)
    catalog = Catalog()
    kept = catalog.find(BASH_ENV_GROUP, "region")
    other = "second-dist 3.1" if first == "first-dist" else "first-dist 1.0"
    assert kept.distribution == first
    assert [i for i in catalog.items(BASH_ENV_GROUP) if i.name == "region"] == [kept]
    (loss,) = catalog.lost(BASH_ENV_GROUP)
    assert loss.kept == kept and loss.item.who() == other
    assert loss.message == (
        f"entry point 'region' in group 'dsh.bash_env' is claimed by two distributions: {kept.who()} "
        f"(installed first) keeps it, {other} is left out (the first installed wins; uninstall one of them to choose)"
    )


def test_the_discovery_cache_keeps_who_was_left_out(site: Path, tmp_path: Path) -> None:
    one = make_dist(site, "first-dist", "1.0", {BASH_ENV_GROUP: {"region": "first:c"}})
    _installed(one, -100)
    make_dist(site, "second-dist", "3.1", {BASH_ENV_GROUP: {"region": "second:c"}})
    cache = tmp_path / "run" / "discovery"
    cache.parent.mkdir(mode=0o700)
    scanned = Catalog(EntryPointFile(str(cache)))
    cached = Catalog(EntryPointFile(str(cache)))  # read back: no rescan
    for catalog in (scanned, cached):
        assert catalog.find(BASH_ENV_GROUP, "region").distribution == "first-dist"
        assert [loss.item.who() for loss in catalog.lost(BASH_ENV_GROUP)] == ["second-dist 3.1"]
    assert cached.lost(BASH_ENV_GROUP) == scanned.lost(BASH_ENV_GROUP)


def test_unknown_name_lists_available(site: Path) -> None:
    with pytest.raises(DiscoveryError) as err:
        Catalog().find(PLUGINS_GROUP, "nope")
    assert "no entry point 'nope'" in str(err.value) and "bash-env" in str(err.value) and "tool-bash" in str(err.value)
