"""How a deployment layers on the default one (a deployment file, a Harness's mapping)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.harness import layer_on_defaults
from dsh.loader import DeploymentError, parse_deployment


def _ids(source: str, home: Path, **raw: object) -> list[str]:
    deployment = layer_on_defaults(parse_deployment(raw, source), source, {"DSH_HOME": str(home)})
    return [entry.id for entry in deployment.plugins]


def test_a_file_states_only_what_it_changes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # hooks is a default with or without a hooks file: the loaded dialects keep their peers' identity from children.
    assert _ids("d.yaml", home) == ["bash-local", "bash-env", "tool-bash", "skills", "hooks"]
    assert _ids("d.yaml", home, persistence={"backend": "sqlite"}) == [
        "bash-local",
        "bash-env",
        "tool-bash",
        "skills",
        "hooks",
    ]
    # An entry with a default's id replaces it in place; a new id is added after the defaults.
    layered = layer_on_defaults(
        parse_deployment({"plugins": [{"id": "extra", "name": "tool-pwsh"}, {"id": "tool-bash", "config": {"x": 1}}]}),
        "d.yaml",
        {"DSH_HOME": str(home)},
    )
    assert [(e.id, e.name, e.config) for e in layered.plugins] == [
        ("bash-local", "bash-local", {}),
        ("bash-env", "bash-env", {}),
        ("tool-bash", "tool-bash", {"x": 1}),
        ("skills", "skills", {}),
        ("hooks", "hooks", {"home_files": True}),
        ("extra", "tool-pwsh", {}),
    ]
    assert _ids("d.yaml", home, plugins=[{"id": "tool-bash", "enabled": False}]) == [
        "bash-local",
        "bash-env",
        "skills",
        "hooks",
    ]
    assert _ids("d.yaml", home, plugins=[]) == ["bash-local", "bash-env", "tool-bash", "skills", "hooks"]


def test_disabling_what_is_not_a_default_names_the_defaults(tmp_path: Path) -> None:
    with pytest.raises(DeploymentError, match=r"d.yaml: entry 'hook' has enabled: false but is not a default plugin"):
        _ids("d.yaml", tmp_path, plugins=[{"id": "hook", "enabled": False}])


def test_turning_hooks_off_boots_alike_with_and_without_a_hooks_file(tmp_path: Path) -> None:
    off = {"plugins": [{"id": "hooks", "enabled": False}]}
    bare = tmp_path / "bare"
    assert _ids("d.yaml", bare, **off) == ["bash-local", "bash-env", "tool-bash", "skills"]
    hooked = tmp_path / "hooked"
    (hooked / "hooks").mkdir(parents=True, mode=0o700)
    hooked.chmod(0o700)
    (hooked / "hooks" / "claude.json").write_text("{}")
    assert _ids("d.yaml", hooked) == ["bash-local", "bash-env", "tool-bash", "skills", "hooks"]
    assert _ids("d.yaml", hooked, **off) == ["bash-local", "bash-env", "tool-bash", "skills"]
    # A hooks entry of the file's own takes the default's place.
    hooks_entry = {"id": "hooks", "config": {"claude": "c.json"}}
    assert _ids("d.yaml", bare, plugins=[{"id": "extra", "name": "tool-pwsh"}, hooks_entry]) == [
        "bash-local",
        "bash-env",
        "tool-bash",
        "skills",
        "hooks",
        "extra",
    ]
