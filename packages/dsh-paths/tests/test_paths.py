from __future__ import annotations

import os
import subprocess
import sys
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


def test_home_text_is_the_same_rule_and_the_floor_costs_neither_typing_nor_pathlib(tmp_path: Path) -> None:
    from dsh.floor import home_text

    for configured, env in ((None, {"DSH_HOME": str(tmp_path)}), ("~/x", {"HOME": str(tmp_path)}), (None, {})):
        assert home_text(configured, env) == str(resolve_dsh_home(configured, env))
    probe = "import sys; import dsh.floor; print('pathlib' in sys.modules, 'typing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out == "False False\n", "a served dsh exec reads its home, trust, deployment in dsh.floor"
