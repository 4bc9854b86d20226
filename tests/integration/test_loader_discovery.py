from __future__ import annotations

from pathlib import Path

import pytest

from dsh.bash_env import BASH_ENV_GROUP
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
