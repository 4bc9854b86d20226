from __future__ import annotations

import os
from pathlib import Path

from dsh.paths import resolve_dsh_home


def test_configured_value_wins_over_environment(tmp_path: Path) -> None:
    assert resolve_dsh_home(tmp_path / "a", {"DSH_HOME": str(tmp_path / "b")}) == tmp_path / "a"


def test_environment_then_default() -> None:
    assert resolve_dsh_home(None, {"DSH_HOME": "/srv/dsh"}) == Path("/srv/dsh")
    assert resolve_dsh_home(None, {"HOME": "/home/u"}) == Path("/home/u/.dsh")


def test_blank_counts_as_unset() -> None:
    assert resolve_dsh_home("  ", {"DSH_HOME": " ", "HOME": "/home/u"}) == Path("/home/u/.dsh")


def test_tilde_and_relative_are_made_absolute(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert resolve_dsh_home("~/x", {"HOME": "/home/u"}) == Path("/home/u/x")
    monkeypatch.chdir(tmp_path)
    assert resolve_dsh_home("rel", {}) == tmp_path / "rel"


def test_resolution_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "never"
    resolve_dsh_home(target, {})
    resolve_dsh_home(None, {"DSH_HOME": str(target)})
    assert not target.exists()
    assert os.listdir(tmp_path) == []
