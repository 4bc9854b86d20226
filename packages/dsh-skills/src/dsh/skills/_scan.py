"""Reading skill folders: ``SKILL.md`` files with ``name`` and ``description`` front matter."""

import builtins
import os
import re
from typing import Any, NamedTuple

from dsh.loader import EntryPointItem
from dsh.paths import UntrustedPathError, check_trusted, read_regular_text

from ._errors import SkillError

HOME_SOURCE = "home"
"""The name of the source for ``<DSH_HOME>/skills``."""
SKILL_FILE = "SKILL.md"
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")
MAX_NAME = 64
"""Skill names as Claude Code and Codex accept them: lower-case letters, digits and hyphens, 64 at most
(the length checked apart: a counted repeat of 63 costs its compile a few milliseconds of every command)."""
MAX_DESCRIPTION = 1024


class SkillSource(NamedTuple):
    """A folder of skills: the home's, or one a ``dsh.skills`` entry point names (an immutable ``NamedTuple``)."""

    name: str
    root: str
    origin: EntryPointItem | None = None


class Skill(NamedTuple):
    """One skill: its front matter, its instructions, and where it came from."""

    name: str
    description: str
    instructions: str
    path: str
    """Absolute path of the ``SKILL.md`` file."""
    source: str
    """``home`` for ``<DSH_HOME>/skills``, else the registered source's name (a ``dsh.skills`` entry point's,
    ``claude-plugin:<name>`` for a Claude Code plugin folder's)."""
    distribution: str | None = None
    version: str | None = None

    @property
    def directory(self) -> str:
        """The skill's folder (files the instructions refer to live here)."""
        return os.path.dirname(self.path)

    def as_json(self) -> dict[str, Any]:
        """The row ``dsh skills --json`` prints."""
        return {
            "name": self.name,
            "description": self.description,
            "path": self.path,
            "source": self.source,
            "distribution": self.distribution,
            "version": self.version,
        }


def _front_matter(text: str, path: str) -> tuple[dict[str, Any], str]:
    import yaml  # only skill files need it

    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{path}: does not start with a '---' line of YAML front matter", path=str(path))
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise SkillError(f"{path}: the YAML front matter has no closing '---' line", path=str(path))
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise SkillError(
            f"{path}: invalid YAML front matter{where}: {getattr(exc, 'problem', exc)}", path=str(path)
        ) from None
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: the front matter must be a mapping with 'name' and 'description'", path=str(path))
    return meta, "".join(lines[end + 1 :]).strip("\n") + "\n"


def parse_skill(path: str | os.PathLike[str], source: str = HOME_SOURCE, origin: EntryPointItem | None = None) -> Skill:
    """Read one ``SKILL.md``; raise :class:`SkillError` naming the file and what is wrong."""
    where = os.path.abspath(os.fspath(path))
    try:
        text = read_regular_text(where, "skill file")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SkillError(f"{where}: cannot read skill: {reason}", path=where) from None
    meta, body = _front_matter(text, where)
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or len(name) > MAX_NAME or not NAME_PATTERN.fullmatch(name):
        raise SkillError(
            f"{where}: front matter 'name' is {name!r}; use 1 to 64 lower-case letters, digits and hyphens",
            path=where,
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{where}: front matter 'description' is missing or blank", path=where)
    if len(description) > MAX_DESCRIPTION:
        raise SkillError(
            f"{where}: front matter 'description' is {len(description)} characters; at most 1024", path=where
        )
    return Skill(
        name=name,
        description=" ".join(description.split()),
        instructions=body,
        path=where,
        source=source,
        distribution=origin.distribution if origin else None,
        version=origin.version if origin else None,
    )


class Discovery(NamedTuple):
    """What one scan found: skills sorted by name, and one warning per file or source that failed."""

    skills: tuple[Skill, ...]
    warnings: tuple[str, ...]

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``, if found."""
        return next((s for s in self.skills if s.name == name), None)


def scan(source: SkillSource, warnings: builtins.list[str]) -> builtins.list[Skill]:
    """The skills of one source; each file or folder that fails adds one line to ``warnings``."""
    try:
        entries = sorted(os.scandir(source.root), key=lambda e: e.name)
    except FileNotFoundError:
        if source.name != HOME_SOURCE:  # a home without skills is normal; a plugin's missing folder is not
            warnings.append(f"skill source '{source.name}': folder {source.root} does not exist")
        return []
    except OSError as exc:
        warnings.append(f"skill source '{source.name}': cannot read {source.root}: {exc.strerror or exc}")
        return []
    found = []
    try:
        # A skill's text goes straight to the model: only folders and files others cannot write count.
        check_trusted(source.root, "skills folder")
    except UntrustedPathError as exc:
        warnings.append(str(exc))
        return []
    for entry in entries:
        candidate = os.path.join(entry.path, SKILL_FILE)
        if not entry.is_dir() or not os.path.exists(candidate):
            continue
        try:
            check_trusted(entry.path, "skill folder")
            check_trusted(candidate, "skill file")
            found.append(parse_skill(candidate, source.name, source.origin))
        except (SkillError, UntrustedPathError) as exc:
            warnings.append(str(exc))
    return found
