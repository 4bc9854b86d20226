"""Skills: discovery under the home, plugin-shipped skills, the skill tool, dsh skills, one home."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.skills import SkillError, SkillRegistry, parse_skill

SKILL_PLUGINS: list[dict[str, object]] = [{"id": "skills", "name": "skills"}]


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skill_text(name: str, description: str, body: str = "Do the thing.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def test_parse_reads_front_matter_and_instructions(tmp_path: Path) -> None:
    path = write_skill(
        tmp_path,
        "notes",
        "---\nname: release-notes\ndescription: >\n  Write release notes\n  from git.\n"
        "allowed-tools: Bash\n---\n\n# Steps\nRun git log.\n",
    )
    skill = parse_skill(path)
    assert (skill.name, skill.description) == ("release-notes", "Write release notes from git.")
    assert skill.instructions == "# Steps\nRun git log.\n"
    assert skill.path == str(path) and skill.directory == str(path.parent) and skill.source == "home"


def test_home_wins_over_a_plugin_source_and_the_shadowed_one_is_named(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = write_skill(home / "skills", "deploy", skill_text("deploy", "Mine."))
    theirs = write_skill(tmp_path / "plugin", "deploy", skill_text("deploy", "Theirs."))
    write_skill(tmp_path / "plugin", "lint", skill_text("lint", "Lint it."))
    registry = SkillRegistry(home)
    dispose = registry.register("acme", tmp_path / "plugin")
    found = registry.discover()
    assert [(s.name, s.description, s.source) for s in found.skills] == [
        ("deploy", "Mine.", "home"),
        ("lint", "Lint it.", "acme"),
    ]
    assert found.warnings == (f"skill 'deploy' in {theirs} is shadowed by {mine}",)
    dispose()
    assert [s.name for s in registry.discover().skills] == ["deploy"]


def test_a_malformed_skill_error_carries_its_file(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "bad", "---\nname: Bad Name\ndescription: y\n---\n")
    with pytest.raises(SkillError, match="'name' is 'Bad Name'") as err:
        parse_skill(path)
    assert err.value.path == str(path)


def test_a_fifo_as_skill_md_is_refused_without_waiting(tmp_path: Path) -> None:
    import os
    import signal

    (tmp_path / "ff").mkdir()
    fifo = tmp_path / "ff" / "SKILL.md"
    os.mkfifo(fifo, 0o600)
    signal.alarm(10)  # a blocking open() would wait for a writer forever: SIGALRM ends the run instead
    try:
        with pytest.raises(SkillError, match=rf"^{fifo}: cannot read skill: it is a FIFO, not a regular file$"):
            parse_skill(fifo)
    finally:
        signal.alarm(0)
