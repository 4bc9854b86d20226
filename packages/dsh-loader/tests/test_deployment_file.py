from __future__ import annotations

from pathlib import Path

import pytest

from dsh.loader import (
    DeploymentError,
    load_deployment,
    parse_deployment,
)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    return path


def test_invalid_entry_names_file_entry_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "plugins:\n  - {id: hooks, name: hooks, confg: {}}\n")
    with pytest.raises(DeploymentError) as err:
        load_deployment(path)
    message = str(err.value)
    assert str(path) in message and "entry 'hooks' (plugins[0])" in message and "field 'confg'" in message


def test_name_defaults_to_id_and_duplicate_ids_fail(tmp_path: Path) -> None:
    assert parse_deployment({"plugins": [{"id": "x"}]}, "d.yaml").plugins[0].name == "x"
    with pytest.raises(DeploymentError, match=r"plugins\[0\], field 'id'"):
        parse_deployment({"plugins": [{"id": "", "name": "x"}]}, "d.yaml")
    with pytest.raises(DeploymentError, match="entry id 'a' appears twice"):
        parse_deployment({"plugins": [{"id": "a", "name": "n"}, {"id": "a", "name": "m"}]}, "d.yaml")


def test_yaml_syntax_and_shape_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DeploymentError, match=r"deploy.yaml: invalid YAML at line 3"):
        load_deployment(_write(tmp_path, "plugins:\n  - {id: a, name: [\n"))
    with pytest.raises(DeploymentError, match="must be a mapping"):
        load_deployment(_write(tmp_path, "- a\n"))
    with pytest.raises(DeploymentError, match="cannot read deployment file"):
        load_deployment(tmp_path / "absent.yaml")
