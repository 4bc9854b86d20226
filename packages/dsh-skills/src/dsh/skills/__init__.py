"""Skills for dsh: ``<DSH_HOME>/skills/<name>/SKILL.md`` and plugin-shipped skills, and the ``skill`` tool.

Load the ``skills`` plugin, then ``ctx.require(SKILLS).discover()`` lists what is installed. A
distribution ships skills with an entry point in the ``dsh.skills`` group (:data:`SKILLS_GROUP`).
"""

from __future__ import annotations

from ._errors import SkillError
from ._plugin import SkillsConfig, plugin
from ._scan import Discovery, Skill, SkillSource, parse_skill
from ._skills import SKILLS, SKILLS_GROUP, SkillRegistry

__all__ = [
    "SKILLS",
    "SKILLS_GROUP",
    "Discovery",
    "Skill",
    "SkillError",
    "SkillRegistry",
    "SkillSource",
    "SkillsConfig",
    "parse_skill",
    "plugin",
]
