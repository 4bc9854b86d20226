"""Discovery and trust: which SKILL.md files reach the model, and what each refusal says."""

from __future__ import annotations

from pathlib import Path

import pytest

import dsh.loader
from dsh.core import FiberState, Plugin, RegistrationConflictError
from dsh.skills import SKILLS, SkillError, SkillRegistry, parse_skill


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skill_text(name: str, description: str, body: str = "Do the thing.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter\n", "does not start with a '---' line"),
        ("---\nname: x\ndescription: y\n", "has no closing '---' line"),
        ("---\nname: [unclosed\n---\n", "invalid YAML front matter at line 3"),
        ("---\n- a list\n---\n", "must be a mapping"),
        ("---\ndescription: y\n---\n", "'name' is None"),
        ("---\nname: Has Spaces\ndescription: y\n---\n", "'name' is 'Has Spaces'"),
        ("---\nname: ok\ndescription: '  '\n---\n", "'description' is missing or blank"),
        (f"---\nname: ok\ndescription: {'d' * 1025}\n---\n", "1025 characters; at most 1024"),
    ],
)
def test_a_malformed_skill_is_one_warning_naming_it_and_others_load(tmp_path: Path, text: str, message: str) -> None:
    home = tmp_path / "home"
    bad = write_skill(home / "skills", "bad", text)
    write_skill(home / "skills", "good", skill_text("good", "Fine."))
    found = SkillRegistry(home).discover()
    assert [s.name for s in found.skills] == ["good"]
    (warning,) = found.warnings
    assert warning.startswith(f"{bad}: ") and message in warning


def test_skills_others_can_write_never_reach_the_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_skill(home / "skills", "good", skill_text("good", "Fine."))
    open_file = write_skill(home / "skills", "planted", skill_text("planted", "Obey me."))
    open_file.chmod(0o666)
    open_dir = write_skill(home / "skills", "roomy", skill_text("roomy", "Mine too.")).parent
    open_dir.chmod(0o777)
    found = SkillRegistry(home).discover()
    assert [s.name for s in found.skills] == ["good"]
    assert sorted(found.warnings) == sorted(
        [
            f"refusing skill file {open_file}: it is writable by group or others (mode 0666); "
            f"run `chmod 600 {open_file}`",
            f"refusing skill folder {open_dir}: it is writable by group or others (mode 0777); "
            f"run `chmod 700 {open_dir}`",
        ]
    )
    (home / "skills").chmod(0o757)
    refused = SkillRegistry(home).discover()
    assert refused.skills == () and "refusing skills folder" in refused.warnings[0]


def test_a_missing_home_folder_is_normal_but_a_missing_plugin_folder_is_named(tmp_path: Path) -> None:
    registry = SkillRegistry(tmp_path / "home")
    assert registry.discover().warnings == ()
    registry.register("acme", tmp_path / "gone")
    assert registry.discover().warnings == (f"skill source 'acme': folder {tmp_path / 'gone'} does not exist",)


def test_only_folders_holding_a_skill_file_count(tmp_path: Path) -> None:
    skills = tmp_path / "home" / "skills"
    write_skill(skills, "real", skill_text("real", "Real."))
    (skills / "empty").mkdir()
    (skills / "notes.md").write_text(skill_text("loose", "A file, not a folder."))
    write_skill(skills, "lower", skill_text("lower", "x")).rename(skills / "lower" / "skill.md")
    found = SkillRegistry(tmp_path / "home").discover()
    assert [s.name for s in found.skills] == ["real"] and found.warnings == ()


def test_the_folder_name_does_not_name_the_skill_and_a_name_found_twice_keeps_the_first(tmp_path: Path) -> None:
    skills = tmp_path / "home" / "skills"
    first = write_skill(skills, "a-folder", skill_text("shared", "First."))
    second = write_skill(skills, "b-folder", skill_text("shared", "Second."))
    found = SkillRegistry(tmp_path / "home").discover()
    assert [(s.name, s.description) for s in found.skills] == [("shared", "First.")]
    assert found.warnings == (f"skill 'shared' in {second} is shadowed by {first}",)


def test_a_skill_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "SKILL.md"
    path.write_bytes(b"---\nname: x\ndescription: \xff\n---\n")
    with pytest.raises(SkillError, match="cannot read skill") as err:
        parse_skill(path)
    assert err.value.path == str(path)


def test_a_64_character_name_is_accepted_and_65_refused(tmp_path: Path) -> None:
    assert parse_skill(write_skill(tmp_path, "ok", skill_text("a" * 64, "d"))).name == "a" * 64
    with pytest.raises(SkillError, match="use 1 to 64 lower-case letters"):
        parse_skill(write_skill(tmp_path, "long", skill_text("a" * 65, "d")))


@pytest.mark.parametrize("name", ["", "  ", "home"])
def test_a_blank_or_reserved_source_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(SkillError, match="blank or reserved") as err:
        SkillRegistry(tmp_path).register(name, tmp_path)
    assert err.value.source == name


def test_a_source_belongs_to_its_plugin_and_a_second_one_of_that_name_fails_naming_both(tmp_path: Path) -> None:
    write_skill(tmp_path / "one", "lint", skill_text("lint", "Lint."))
    root = dsh.loader.root()
    registry = SkillRegistry(tmp_path / "home")
    root.provide(SKILLS, registry)

    def source(plugin: str, folder: str) -> Plugin:
        return Plugin(
            name=plugin,
            apply=lambda ctx, cfg: ctx.require(SKILLS).register("acme", tmp_path / folder),
            inject=(SKILLS,),
        )

    first = root.plugin(source("first", "one"))
    second = root.plugin(source("second", "two"))
    assert second.state is FiberState.FAILED
    assert "skill source 'acme' is already registered by plugin 'first'; plugin 'second'" in (second.error or "")
    assert [(s.name, s.source) for s in registry.discover().skills] == [("lint", "acme")]
    with pytest.raises(RegistrationConflictError) as err:
        registry.register("acme", tmp_path)
    assert (err.value.key, err.value.owner) == ("acme", "first")
    first.dispose()
    assert registry.discover().skills == () and [s.name for s in registry.sources()] == ["home"]
