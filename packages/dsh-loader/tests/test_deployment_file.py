from __future__ import annotations

from pathlib import Path

import pytest

from dsh.core import FieldError
from dsh.loader import (
    Deployment,
    DeploymentError,
    ModelChoice,
    PersistenceChoice,
    PluginEntry,
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


@pytest.mark.parametrize("bad_id", [["a"], 7, {"x": 1}])
def test_an_id_that_is_no_string_is_the_field_at_fault_not_the_entry_s_name(bad_id: object) -> None:
    # It once read "entry '['a']' (plugins[0]), field 'id' must be a string".
    with pytest.raises(DeploymentError) as err:
        parse_deployment({"plugins": [{"id": bad_id, "name": "hooks"}]}, "d.yaml")
    assert str(err.value) == "d.yaml: plugins[0], field 'id' must be a string"


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


def test_a_record_in_a_file_is_a_mapping_never_a_list_of_values(tmp_path: Path) -> None:
    # pydantic alone builds a NamedTuple from a list, in field order: [sqlite] would be backend 'sqlite'.
    with pytest.raises(DeploymentError, match=r"^d.yaml: field 'persistence' must be a mapping$"):
        parse_deployment({"persistence": ["sqlite"]}, "d.yaml")
    with pytest.raises(DeploymentError, match=r"^d.yaml: plugins\[1\] must be a mapping$"):
        parse_deployment({"plugins": [{"id": "a"}, ["b", "c"]]}, "d.yaml")
    with pytest.raises(DeploymentError, match=r"^d.yaml: field 'model' must be a mapping$"):
        parse_deployment({"model": "anthropic"}, "d.yaml")
    with pytest.raises(DeploymentError, match=r"^d.yaml: field 'plugins' must be a list$"):
        parse_deployment({"plugins": "a"}, "d.yaml")


def test_the_records_are_checked_named_tuples_built_in_code_as_from_a_file() -> None:
    parsed = parse_deployment(
        {"persistence": {"backend": "sqlite"}, "plugins": [{"id": "x"}], "model": {"provider": "m"}}
    )
    built = Deployment(persistence=PersistenceChoice("sqlite"), plugins=[PluginEntry("x")], model=ModelChoice("m"))
    assert parsed == built and type(parsed.plugins) is tuple and type(parsed.plugins[0]) is PluginEntry
    assert parsed.plugins[0].config == {} and parsed.persistence.config == {}
    with pytest.raises(FieldError, match="entry id 'x' appears twice"):
        built.replace(plugins=[PluginEntry("x"), PluginEntry("x", name="y")])  # replace() checks; _replace would not
    assert built.replace(dsh_home=" ").dsh_home is None
    for bad in (lambda: PluginEntry(""), lambda: PersistenceChoice(""), lambda: ModelChoice(" ")):
        with pytest.raises(FieldError, match="must not be empty"):
            bad()
