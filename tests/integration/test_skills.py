"""Skills: discovery under the home, plugin-shipped skills, the skill tool, dsh skills, one home."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from dsh.agent import BUILTINS
from dsh.loader import BootError, boot, parse_deployment
from dsh.session import TOOLS, ToolExecution
from dsh.skills import SKILLS, SKILLS_GROUP
from tests.helpers import dsh, harness, make_dist, remove_dist, touch_dir

SKILL_PLUGINS: list[dict[str, object]] = [{"id": "skills", "name": "skills"}]


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skill_text(name: str, description: str, body: str = "Do the thing.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def test_plugin_skills_are_attributed_and_removed_on_uninstall(site: Path, tmp_path: Path) -> None:
    package = site / "acme_skills"
    write_skill(package, "lint", skill_text("lint", "Lint the repository."))
    (package / "__init__.py").write_text("")
    info = make_dist(site, "acme-skills", "2.1", {SKILLS_GROUP: {"acme": "acme_skills"}})
    runtime = harness(tmp_path, plugins=SKILL_PLUGINS)
    try:
        registry = runtime.ctx.require(SKILLS)
        (skill,) = registry.discover().skills
        assert (skill.name, skill.source, skill.distribution, skill.version) == ("lint", "acme", "acme-skills", "2.1")
        assert {f.label: f.state.value for f in runtime.fibers() if f.label.startswith("skills:")} == {
            "skills:acme": "active"
        }
        remove_dist(info)
        touch_dir(site)
        runtime.refresh()
        assert registry.discover().skills == ()
        assert not [f for f in runtime.fibers() if f.label.startswith("skills:")]
    finally:
        runtime.close()


def test_a_broken_skills_entry_point_is_a_warning_not_a_boot_failure(site: Path, tmp_path: Path) -> None:
    make_dist(site, "acme-broken", "1.0", {SKILLS_GROUP: {"broken": "acme_skills_missing"}})
    runtime = harness(tmp_path, plugins=SKILL_PLUGINS)
    try:
        (warning,) = runtime.warnings()
        assert "plugin 'skills:broken' (from acme-broken 1.0) failed" in warning
        assert runtime.ctx.require(SKILLS).discover().skills == ()
    finally:
        runtime.close()


def test_the_skill_tool_lists_and_loads(tmp_path: Path) -> None:
    runtime = harness(tmp_path, plugins=SKILL_PLUGINS)
    skills = tmp_path / "home" / "skills"
    write_skill(skills, "deploy", skill_text("deploy", "Ship it.", "Run make deploy.\n"))
    try:
        tool = runtime.ctx.require(TOOLS).get("skill")
        assert tool is not None
        call = ToolExecution("skill", "c")
        listed = asyncio.run(tool({}, call))
        assert listed.output == "Available skills:\n- deploy: Ship it." and not listed.is_error
        loaded = asyncio.run(tool({"name": "deploy"}, call))
        assert loaded.output == f"Skill 'deploy' (folder: {skills / 'deploy'})\n\nRun make deploy.\n"
        unknown = asyncio.run(tool({"name": "nope"}, call))
        assert unknown.is_error and unknown.output == "no skill named 'nope'; skills: deploy"
    finally:
        runtime.close()


def test_a_conflicting_skills_home_fails_composition_naming_both(tmp_path: Path) -> None:
    deployment = parse_deployment(
        {
            "dsh_home": str(tmp_path / "one"),
            "plugins": [{"id": "skills", "name": "skills", "config": {"dsh_home": str(tmp_path / "two")}}],
        }
    )
    with pytest.raises(BootError) as info:
        boot(deployment, source="d.yaml", builtins=BUILTINS)
    message = str(info.value)
    assert "\n" not in message
    assert (
        f"plugin 'skills': config.dsh_home resolves to {tmp_path / 'two'} but the deployment's home is "
        f"{tmp_path / 'one'}; configure one harness home"
    ) in message


@pytest.mark.integration
def test_dsh_skills_and_the_model_calling_skill_in_the_loop(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_skill(home / "skills", "deploy", skill_text("deploy", "Ship it.", "Run make deploy.\n"))
    bad = write_skill(home / "skills", "broken", "---\nname: broken\n---\n")
    listed = dsh("skills", "--json", home=home)
    assert listed.returncode == 0, listed.stderr
    out = json.loads(listed.stdout)
    assert out["home"] == str(home)
    assert [(s["name"], s["source"]) for s in out["skills"]] == [("deploy", "home")]
    assert out["warnings"] == [f"{bad}: front matter 'description' is missing or blank"]
    assert listed.stderr == f"dsh: warning: {bad}: front matter 'description' is missing or blank\n"
    text = dsh("skills", home=home)
    assert text.stdout == f"deploy\n    Ship it.\n    {home / 'skills' / 'deploy' / 'SKILL.md'} (home)\n"

    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "user": "deploy please",
                        "steps": [
                            {"tool_calls": [{"name": "skill", "arguments": {}}]},
                            {"tool_calls": [{"name": "skill", "arguments": {"name": "deploy"}}]},
                            {"text": "following the skill"},
                        ],
                    }
                ]
            }
        )
    )
    run = dsh("run", "--script", str(script), "--json", home=home)
    assert run.returncode == 0, run.stderr
    calls = json.loads(run.stdout)["turns"][0]["tool_calls"]
    assert calls[0]["output"] == "Available skills:\n- deploy: Ship it."
    assert calls[1]["output"].endswith("\n\nRun make deploy.\n") and not calls[1]["is_error"]


@pytest.mark.integration
def test_dsh_skills_names_a_deployment_without_the_plugin(tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("plugins:\n  - {id: skills, enabled: false}\n")
    proc = dsh("skills", "--deployment", str(deployment), home=tmp_path / "home")
    assert proc.returncode == 1
    assert (
        proc.stderr == f"dsh: {deployment}: the deployment loads no skills plugin; add {{id: skills, name: skills}}\n"
    )


@pytest.mark.integration
def test_dsh_skills_refuses_two_homes_in_one_line(tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text(
        f"dsh_home: {tmp_path / 'one'}\nplugins:\n  - {{id: skills, config: {{dsh_home: {tmp_path / 'two'}}}}}\n"
    )
    proc = dsh("skills", "--deployment", str(deployment), home=tmp_path / "home")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr == (
        f"dsh: {deployment}: deployment did not boot: entry 'skills' (plugin 'skills') failed: plugin 'skills': "
        f"config.dsh_home resolves to {tmp_path / 'two'} but the deployment's home is {tmp_path / 'one'}; "
        "configure one harness home\n"
    )
