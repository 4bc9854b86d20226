"""The ``skills`` plugin: the registry service, ``dsh.skills`` entry points, and the model-facing ``skill`` tool."""

import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from dsh.core import Context, Plugin
from dsh.loader import EntryPointItem, follow_group
from dsh.session import TOOLS, ToolExecution, ToolResult, ToolSpec, plugin_home

from ._errors import SkillError
from ._skills import SKILLS, SKILLS_GROUP, SkillRegistry

SKILL_DESCRIPTION = (
    "Load a skill: instructions for a kind of task, installed for this harness. Call it without `name` "
    "to list the available skills and what each is for; call it with a skill's `name` to read its full "
    "instructions (and the folder its files are in) before doing a task the skill describes."
)


class SkillTool:
    """The ``skill`` tool. Its spec never lists skills, so installing one never changes the model's prefix."""

    spec = ToolSpec(
        name="skill",
        description=SKILL_DESCRIPTION,
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill to load; omit it to list the skills."},
            },
            "additionalProperties": False,
        },
    )

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        """List the skills, or return one skill's instructions."""
        found = self._ctx.require(SKILLS).discover()
        name = arguments.get("name")
        if name is None or name == "":
            if not found.skills:
                return ToolResult("No skills are installed.", data={"skills": []})
            lines = [f"- {s.name}: {s.description}" for s in found.skills]
            return ToolResult("Available skills:\n" + "\n".join(lines), data={"skills": [s.name for s in found.skills]})
        if not isinstance(name, str):
            return ToolResult("argument 'name' must be a string", is_error=True)
        skill = found.get(name)
        if skill is None:
            known = ", ".join(s.name for s in found.skills) or "none"
            return ToolResult(f"no skill named '{name}'; skills: {known}", is_error=True)
        text = f"Skill '{skill.name}' (folder: {skill.directory})\n\n{skill.instructions}"
        return ToolResult(text, data={"skill": skill.as_json()})


class SkillsConfig(NamedTuple):
    """Config of the ``skills`` plugin."""

    dsh_home: str | None = None
    """Only to state it: the deployment's home is used, and the plugin fails when this differs."""
    entry_points: bool = True
    """Load the skill folders every ``dsh.skills`` entry point names."""
    exclude: tuple[str, ...] = ()
    """Entry-point names not to load."""


def skill_root(obj: object, item: EntryPointItem) -> Path:
    """The folder an entry point's object names: a package's own folder, a path, or what a callable returns."""
    if isinstance(obj, types.ModuleType):
        paths = list(getattr(obj, "__path__", []))
        if paths:
            return Path(paths[0])
        if obj.__file__:
            return Path(obj.__file__).parent
    if callable(obj) and not isinstance(obj, str | os.PathLike):
        obj = obj()
    if isinstance(obj, str | os.PathLike) and os.path.isabs(os.fspath(obj)):
        return Path(os.fspath(obj))
    raise SkillError(
        f"entry point '{item.name}' in group '{SKILLS_GROUP}' (from {item.distribution} {item.version}) names "
        f"{obj!r}; name a package, an absolute folder path, or a callable returning one",
        source=item.name,
    )


def _source_plugin(item: EntryPointItem) -> Plugin:
    def apply(ctx: Context, config: None) -> None:
        ctx.require(SKILLS).register(item.name, skill_root(item.load(), item), origin=item)

    return Plugin(name=f"skills:{item.name}", apply=apply, inject=(SKILLS,))


def _apply(ctx: Context, config: SkillsConfig) -> None:
    # The deployment's one home; a differing config.dsh_home fails (here, or at composition).
    home = plugin_home(ctx, config.dsh_home)
    ctx.provide(SKILLS, SkillRegistry(home))
    ctx.require(TOOLS).register(SkillTool(ctx))
    if not config.entry_points:
        return
    follow_group(ctx, SKILLS_GROUP, _source_plugin, label="skills", exclude=config.exclude)


plugin = Plugin(name="skills", apply=_apply, Config=SkillsConfig, inject=(TOOLS,))
"""The ``skills`` entry of the ``dsh.plugins`` group."""
