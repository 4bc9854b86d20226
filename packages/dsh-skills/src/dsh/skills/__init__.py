"""Skills for dsh: ``<DSH_HOME>/skills/<name>/SKILL.md`` and plugin-shipped skills, and the ``skill`` tool.

Load the ``skills`` plugin, then ``ctx.require(SKILLS).discover()`` lists what is installed.
"""

from ._errors import SkillError
from ._plugin import SKILL_DESCRIPTION, SkillsConfig, SkillTool, plugin, skill_root
from ._skills import (
    HOME_SOURCE,
    NAME_PATTERN,
    SKILL_FILE,
    SKILLS,
    SKILLS_GROUP,
    Discovery,
    Skill,
    SkillRegistry,
    SkillSource,
    parse_skill,
)

__all__ = [
    "HOME_SOURCE",
    "NAME_PATTERN",
    "SKILLS",
    "SKILLS_GROUP",
    "SKILL_DESCRIPTION",
    "SKILL_FILE",
    "Discovery",
    "Skill",
    "SkillError",
    "SkillRegistry",
    "SkillSource",
    "SkillTool",
    "SkillsConfig",
    "parse_skill",
    "plugin",
    "skill_root",
]
