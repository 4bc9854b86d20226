"""The test utility itself: written distributions are what importlib.metadata sees; no ambient DSH_*."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from dsh.testing import make_dist, remove_dist, touch_dir


def test_a_written_distribution_is_found_with_its_entry_points_and_removed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = make_dist(site, "acme-thing", "2.5", {"acme.group": {"one": "acme_mod:obj"}}, {"acme_mod": "obj = 1\n"})
    (dist,) = importlib.metadata.distributions(path=[str(site)])
    assert (dist.metadata["Name"], dist.version) == ("acme-thing", "2.5")
    assert [(e.group, e.name, e.value) for e in dist.entry_points] == [("acme.group", "one", "acme_mod:obj")]
    before = site.stat().st_mtime_ns
    touch_dir(site)
    assert site.stat().st_mtime_ns > before
    remove_dist(info, ("acme_mod",))
    assert list(site.iterdir()) == []


@pytest.fixture
def ambient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SESSION_ID", "outer")


def test_tests_start_without_ambient_dsh_variables() -> None:
    # The autouse fixture ran before this test: whatever the developer's shell exported is gone.
    assert [k for k in os.environ if k.upper().startswith("DSH_")] == []


def test_a_test_may_set_its_own(ambient: None) -> None:
    assert os.environ["DSH_SESSION_ID"] == "outer"
