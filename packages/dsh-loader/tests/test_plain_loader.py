"""The loader alone takes no shortcut: every catalog scans through importlib.metadata, every deployment file
is read by yaml and validated by pydantic, and nothing is kept on disk. Remembering any of it between
processes is a caller's memo (the ``dsh`` command's lives in its start-up fence)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import dsh.loader.validation
from dsh.loader import PLUGINS_GROUP, Catalog, Deployment, Fingerprint, Row, compose, load_deployment
from dsh.testing import make_dist, remove_dist, touch_dir


def _counting(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_every_catalog_scans_through_importlib_metadata_and_an_uninstall_shows_at_once(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans = _counting(monkeypatch, importlib.metadata, "entry_points")
    info = make_dist(site, "plain-dist", "1.0", {PLUGINS_GROUP: {"plain": "plain_mod:plugin"}})
    touch_dir(site)
    assert Catalog().find(PLUGINS_GROUP, "plain").distribution == "plain-dist"
    assert Catalog().find(PLUGINS_GROUP, "plain").version == "1.0"
    assert len(scans) == 2  # no process-wide or on-disk answer in between
    remove_dist(info)
    touch_dir(site)
    assert "plain" not in Catalog().names(PLUGINS_GROUP)


def test_every_load_of_a_deployment_file_validates_it_with_pydantic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    validations = _counting(monkeypatch, dsh.loader.validation, "validate_named_tuple")
    path = tmp_path / "deployment.yaml"
    path.write_text("persistence: {backend: sqlite}\n")
    path.chmod(0o600)
    for _ in range(2):
        assert load_deployment(path).persistence.backend == "sqlite"
    assert len(validations) == 2


def test_composing_keeps_no_run_time_state_in_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with compose(Deployment(plugins=()), env={"DSH_HOME": str(home)}):
        pass
    assert not (home / "run").exists()


class _Memo:
    """An in-memory entry-point memo: what a caller hands the catalog to skip a scan."""

    def __init__(self) -> None:
        self.held: dict[Fingerprint, list[Row]] = {}

    def get(self, fingerprint: Fingerprint) -> Sequence[Row] | None:
        return self.held.get(fingerprint)

    def put(self, fingerprint: Fingerprint, rows: Sequence[Row]) -> None:
        self.held[fingerprint] = list(rows)


def test_a_memo_answers_for_the_fingerprint_it_was_given_and_an_install_moves_it(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans = _counting(monkeypatch, importlib.metadata, "entry_points")
    memo = _Memo()
    make_dist(site, "memo-dist", "1.0", {PLUGINS_GROUP: {"memo": "memo_mod:plugin"}})
    touch_dir(site)
    first = Catalog(memo)
    second = Catalog(memo)
    assert len(scans) == 1 and second.fingerprint == first.fingerprint
    assert second.find(PLUGINS_GROUP, "memo") == first.find(PLUGINS_GROUP, "memo")
    make_dist(site, "later-dist", "1.0", {PLUGINS_GROUP: {"later": "later_mod:plugin"}})
    touch_dir(site)
    assert "later" in Catalog(memo).names(PLUGINS_GROUP)
    assert len(scans) == 2
