"""The command's entry-point memo (``<home>/run/discovery.cache``): served only when current, never trusted
when foreign, never fatal."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from dsh.cli_fast._memos import EntryPointFile, environment_key
from dsh.loader import PLUGINS_GROUP, Catalog
from dsh.testing import make_dist, remove_dist, touch_dir


def _names(catalog: Catalog) -> list[tuple[str, str, str]]:
    return [(i.name, i.distribution, i.version) for i in catalog.items(PLUGINS_GROUP)]


def _install(site: Path, name: str, version: str = "1.0") -> Path:
    info = make_dist(site, name, version, {PLUGINS_GROUP: {name: f"{name.replace('-', '_')}_mod:plugin"}})
    touch_dir(site)
    return info


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    return run / "discovery.cache"


def _without_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any import of importlib.metadata fail: a catalog built now must come from the cache."""
    monkeypatch.setitem(sys.modules, "importlib.metadata", None)


def test_a_current_cache_answers_without_importlib_metadata(
    site: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(site, "cached-one")
    first = Catalog(EntryPointFile(str(cache)))
    assert ("cached-one", "cached-one", "1.0") in _names(first)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    _without_metadata(monkeypatch)
    second = Catalog(EntryPointFile(str(cache)))
    assert _names(second) == _names(first)
    assert second.find(PLUGINS_GROUP, "cached-one").distribution == "cached-one"


def test_install_uninstall_and_same_version_reinstall_move_the_key(site: Path, cache: Path) -> None:
    Catalog(EntryPointFile(str(cache)))
    info = _install(site, "late")
    assert ("late", "late", "1.0") in _names(Catalog(EntryPointFile(str(cache))))
    # A same-version reinstall: new files, same name and version; the next scan must see it.
    remove_dist(info)
    info = make_dist(site, "late", "1.0", {PLUGINS_GROUP: {"late": "other_mod:plugin"}})
    touch_dir(site)
    assert Catalog(EntryPointFile(str(cache))).find(PLUGINS_GROUP, "late").value == "other_mod:plugin"
    remove_dist(info)
    touch_dir(site)
    assert "late" not in [n for n, _, _ in _names(Catalog(EntryPointFile(str(cache))))]


def test_a_pth_file_moves_the_key(site: Path, cache: Path, tmp_path: Path) -> None:
    Catalog(EntryPointFile(str(cache)))
    before = cache.read_text()
    (site / "editable.pth").write_text(str(tmp_path / "elsewhere") + "\n")
    touch_dir(site)
    Catalog(EntryPointFile(str(cache)))
    assert cache.read_text() != before, "the cache was rewritten under a new key"


def test_refresh_in_a_process_rewrites_the_cache(site: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = Catalog(EntryPointFile(str(cache)))
    _install(site, "seen-by-refresh")
    (diff,) = catalog.refresh()
    assert [i.name for i in diff.added] == ["seen-by-refresh"]
    _without_metadata(monkeypatch)
    assert "seen-by-refresh" in [n for n, _, _ in _names(Catalog(EntryPointFile(str(cache))))]


@pytest.mark.parametrize(
    "damage",
    [
        "",
        "garbage\n",
        "dsh discovery cache 1\n",
        "truncated: the end line is missing",
    ],
)
def test_a_damaged_cache_is_ignored_and_rewritten(site: Path, cache: Path, damage: str) -> None:
    _install(site, "real")
    Catalog(EntryPointFile(str(cache)))
    good = cache.read_text()
    cache.write_text(damage if damage != "truncated: the end line is missing" else good[: good.rindex("end")])
    assert ("real", "real", "1.0") in _names(Catalog(EntryPointFile(str(cache))))
    assert cache.read_text() == good


def _planted(cache: Path) -> str:
    """A current cache whose only item is one no distribution ships: served only if trusted."""
    lines = cache.read_text().split("\n")
    return "\n".join([lines[0], lines[1], f"I\t{PLUGINS_GROUP}\tplanted\tevil:plugin\tevil\t6.6.6\t0", "end", ""])


def test_a_cache_others_can_write_is_not_trusted(site: Path, cache: Path) -> None:
    Catalog(EntryPointFile(str(cache)))
    cache.write_text(_planted(cache))
    assert "planted" in [n for n, _, _ in _names(Catalog(EntryPointFile(str(cache))))], (
        "the planted file is well formed"
    )
    cache.write_text(_planted(cache))
    os.chmod(cache, 0o666)
    assert "planted" not in [n for n, _, _ in _names(Catalog(EntryPointFile(str(cache))))]
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600, "rewritten private"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root")
def test_a_cache_owned_by_another_uid_is_not_trusted(site: Path, cache: Path) -> None:
    Catalog(EntryPointFile(str(cache)))
    cache.write_text(_planted(cache))
    os.chmod(cache, 0o600)
    os.chown(cache, 65534, 65534)
    assert "planted" not in [n for n, _, _ in _names(Catalog(EntryPointFile(str(cache))))]
    assert cache.stat().st_uid == os.geteuid(), "replaced by our own"


def test_a_symlinked_cache_is_not_followed(site: Path, cache: Path, tmp_path: Path) -> None:
    Catalog(EntryPointFile(str(cache)))
    elsewhere = tmp_path / "elsewhere.cache"
    elsewhere.write_text(_planted(cache))
    os.chmod(elsewhere, 0o600)
    cache.unlink()
    cache.symlink_to(elsewhere)
    assert "planted" not in [n for n, _, _ in _names(Catalog(EntryPointFile(str(cache))))]
    assert not cache.is_symlink() and elsewhere.read_text().count("planted") == 1, "the link's target is untouched"


def test_an_unwritable_cache_folder_is_not_fatal(site: Path, tmp_path: Path) -> None:
    _install(site, "still-found")
    assert ("still-found", "still-found", "1.0") in _names(
        Catalog(EntryPointFile(str(tmp_path / "absent" / "discovery.cache")))
    )


def test_two_search_paths_sharing_a_home_keep_their_own_keys(
    site: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(site, "in-both")
    other = tmp_path / "other-site"
    make_dist(other, "only-other", "1.0", {PLUGINS_GROUP: {"only-other": "only_other_mod:plugin"}})
    Catalog(EntryPointFile(str(cache)))
    with monkeypatch.context() as patch:
        patch.syspath_prepend(str(other))
        Catalog(EntryPointFile(str(cache)))
    with monkeypatch.context() as patch:
        _without_metadata(patch)
        assert "only-other" not in [n for n, _, _ in _names(Catalog(EntryPointFile(str(cache))))]
        patch.syspath_prepend(str(other))
        assert "only-other" in [n for n, _, _ in _names(Catalog(EntryPointFile(str(cache))))]


def test_two_spellings_of_one_interpreter_share_one_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A virtual environment's python and python3 are links to one interpreter; the dsh script's
    # shebang names either, as its installer wrote it, and python -m dsh.cli the other.
    alias = tmp_path / "python3"
    alias.symlink_to(sys.executable)
    key = environment_key(Catalog().fingerprint)
    monkeypatch.setattr(sys, "executable", str(alias))
    assert environment_key(Catalog().fingerprint) == key
    other = tmp_path / "other-python"
    other.write_bytes(b"")  # another file is another interpreter
    monkeypatch.setattr(sys, "executable", str(other))
    assert environment_key(Catalog().fingerprint) != key


@pytest.mark.parametrize("executable", [None, ""])
def test_an_embedded_interpreter_without_an_executable_has_one_key(
    executable: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sys.executable may be None or '' when Python is embedded; '' must not resolve to the working directory
    monkeypatch.setattr(sys, "executable", executable)
    monkeypatch.chdir(tmp_path)
    key = environment_key(Catalog().fingerprint)
    monkeypatch.chdir(tmp_path.parent)
    assert environment_key(Catalog().fingerprint) == key
