"""Skills for dsh: ``<DSH_HOME>/skills/<name>/SKILL.md`` and plugin-shipped skills, and the ``skill`` tool.

Load the ``skills`` plugin, then ``ctx.require(SKILLS).discover()`` lists what is installed. A
distribution ships skills with an entry point in the ``dsh.skills`` group (:data:`SKILLS_GROUP`).
``Skill``, ``Discovery`` and ``parse_skill`` resolve lazily: loading the plugin does not define them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import SkillError
from ._plugin import SkillsConfig, plugin
from ._skills import SKILLS, SKILLS_GROUP, SkillRegistry, SkillSource

if TYPE_CHECKING:
    from ._scan import Discovery, Skill, parse_skill

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

_LAZY = frozenset({"Discovery", "Skill", "parse_skill"})


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'dsh.skills' has no attribute {name!r}")
    from . import _scan

    return getattr(_scan, name)
