"""The ``skills`` plugin and the model-facing ``skill`` tool."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import dsh.loader
from dsh.core import Context, FiberState
from dsh.loader import EntryPointItem
from dsh.session import DSH_HOME, TOOLS, ToolExecution, ToolResult, tools_plugin
from dsh.skills import SKILLS, SKILLS_GROUP, SkillError, plugin
from dsh.skills._plugin import SKILL_DESCRIPTION, skill_root


def _write(root: Path, name: str, description: str, body: str = "Do it.\n") -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")
    return path


def _root(tmp_path: Path, config: Mapping[str, Any] | None = None) -> Context:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path / "home")
    root.plugin(tools_plugin)
    fiber = root.plugin(plugin, {"entry_points": False, **(config or {})})
    assert fiber.state is FiberState.ACTIVE, fiber.error
    return root


def _call(root: Context, arguments: Mapping[str, Any]) -> ToolResult:
    tool = root.require(TOOLS).get("skill")
    assert tool is not None
    result: ToolResult = asyncio.run(tool(arguments, ToolExecution("skill", "c-1", arguments)))
    return result


def test_the_spec_never_names_a_skill_so_installing_one_keeps_the_model_prefix(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (before,) = root.require(TOOLS).specs()
    _write(tmp_path / "home" / "skills", "deploy", "Ship it.")
    (after,) = root.require(TOOLS).specs()
    assert before == after and before.description == SKILL_DESCRIPTION
    assert before.parameters == {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill to load; omit it to list the skills."}},
        "additionalProperties": False,
    }


def test_listing_with_no_skills_says_so(tmp_path: Path) -> None:
    root = _root(tmp_path)
    for arguments in ({}, {"name": ""}, {"name": None}):
        result = _call(root, arguments)
        assert (result.output, result.is_error, result.data) == ("No skills are installed.", False, {"skills": []})


def test_the_tool_lists_loads_and_names_what_it_does_not_know(tmp_path: Path) -> None:
    root = _root(tmp_path)
    skills = tmp_path / "home" / "skills"
    _write(skills, "lint", "Lint the code.", "Run ruff.\n")
    _write(skills, "deploy", "Ship it.", "Run make deploy.\n")
    listed = _call(root, {})
    assert listed.output == "Available skills:\n- deploy: Ship it.\n- lint: Lint the code."
    assert listed.data == {"skills": ["deploy", "lint"]}
    loaded = _call(root, {"name": "lint"})
    assert loaded.output == f"Skill 'lint' (folder: {skills / 'lint'})\n\nRun ruff.\n" and not loaded.is_error
    assert loaded.data["skill"]["path"] == str(skills / "lint" / "SKILL.md")
    unknown = _call(root, {"name": "Lint"})
    assert unknown.is_error and unknown.output == "no skill named 'Lint'; skills: deploy, lint"
    wrong = _call(root, {"name": ["lint"]})
    assert wrong.is_error and wrong.output == "argument 'name' must be a string"


def test_a_skill_edited_between_calls_is_read_afresh(tmp_path: Path) -> None:
    root = _root(tmp_path)
    path = _write(tmp_path / "home" / "skills", "lint", "Lint.", "Old steps.\n")
    assert _call(root, {"name": "lint"}).output.endswith("Old steps.\n")
    path.write_text("---\nname: lint\ndescription: Lint.\n---\nNew steps.\n")
    assert _call(root, {"name": "lint"}).output.endswith("New steps.\n")


def test_a_differing_home_in_the_config_fails_the_plugin_naming_both(tmp_path: Path) -> None:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path / "home")
    root.plugin(tools_plugin)
    fiber = root.plugin(plugin, {"entry_points": False, "dsh_home": str(tmp_path / "other")})
    assert fiber.state is FiberState.FAILED
    assert str(tmp_path / "other") in (fiber.error or "") and str(tmp_path / "home") in (fiber.error or "")
    assert root.get(SKILLS) is None and root.require(TOOLS).get("skill") is None


def test_an_unknown_config_field_fails_the_plugin_naming_it(tmp_path: Path) -> None:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path)
    root.plugin(tools_plugin)
    fiber = root.plugin(plugin, {"entry_point": False})
    assert fiber.state is FiberState.FAILED and "entry_point" in (fiber.error or "")


ITEM = EntryPointItem(SKILLS_GROUP, "acme", "acme_skills", "acme-skills", "2.1")


def test_an_entry_point_may_name_a_package_an_absolute_folder_or_a_callable(tmp_path: Path) -> None:
    package = types.ModuleType("acme_skills")
    package.__path__ = [str(tmp_path / "pkg")]
    assert skill_root(package, ITEM) == tmp_path / "pkg"
    module = types.ModuleType("acme_single")
    module.__file__ = str(tmp_path / "mod" / "acme_single.py")
    assert skill_root(module, ITEM) == tmp_path / "mod"
    assert skill_root(str(tmp_path / "abs"), ITEM) == tmp_path / "abs"
    assert skill_root(lambda: tmp_path / "made", ITEM) == tmp_path / "made"


@pytest.mark.parametrize("value", ["relative/skills", 42, lambda: "relative"])
def test_an_entry_point_naming_anything_else_is_an_error_naming_it(value: object) -> None:
    with pytest.raises(SkillError) as err:
        skill_root(value, ITEM)
    assert err.value.source == "acme"
    assert str(err.value).startswith(
        f"entry point 'acme' in group '{SKILLS_GROUP}' (from acme-skills 2.1) names "
    ) and str(err.value).endswith("name a package, an absolute folder path, or a callable returning one")
