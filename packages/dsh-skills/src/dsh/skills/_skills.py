"""Skills: the registry of skill sources; what reading a folder finds (:class:`Skill`,
:class:`Discovery`, :func:`parse_skill`) lives in ``_scan``."""

import builtins
import os
from pathlib import Path

from dsh.core import Disposer, Registry, Service, ServiceKey
from dsh.loader import EntryPointItem

from ._errors import SkillError
from ._scan import HOME_SOURCE, Discovery, Skill, SkillSource, scan

SKILLS_GROUP = "dsh.skills"
"""Entry-point group of plugin-shipped skills: each names a package, an absolute folder, or a callable returning one."""


class SkillRegistry(Service):
    """The ``skills`` service: the home's skills plus every registered source, read afresh on each scan.

    Obtained through ``ctx.get(SKILLS)``, the registry is bound to the caller, so a source a
    plugin registers is an effect of that plugin's fiber.
    """

    def __init__(self, home: str | Path) -> None:
        self._home = str(Path(home).absolute())
        self._sources: Registry[SkillSource] = Registry("skill source")

    @property
    def home(self) -> str:
        """The harness home whose ``skills`` folder is scanned first."""
        return self._home

    def register(self, name: str, root: str | os.PathLike[str], *, origin: EntryPointItem | None = None) -> Disposer:
        """Add a folder of skills under a unique source name; an effect of the caller's fiber.

        A name another source holds fails naming both plugins (:class:`dsh.core.RegistrationConflictError`).
        """
        if not name.strip() or name == HOME_SOURCE:
            raise SkillError(f"skill source name {name!r} is blank or reserved", source=name)
        return self.register_keyed(self._sources, name, SkillSource(name, os.path.abspath(os.fspath(root)), origin))

    def sources(self) -> builtins.list[SkillSource]:
        """The home's source first, then registered sources by name."""
        home = SkillSource(HOME_SOURCE, os.path.join(self._home, "skills"))
        return [home, *self._sources.values()]

    def discover(self) -> Discovery:
        """Read every source now. A name found twice keeps the first (the home wins) and warns."""
        warnings: builtins.list[str] = []
        chosen: dict[str, Skill] = {}
        for source in self.sources():
            for skill in scan(source, warnings):
                first = chosen.get(skill.name)
                if first is not None:
                    warnings.append(f"skill '{skill.name}' in {skill.path} is shadowed by {first.path}")
                    continue
                chosen[skill.name] = skill
        return Discovery(tuple(chosen[n] for n in sorted(chosen)), tuple(warnings))


SKILLS: ServiceKey[SkillRegistry] = ServiceKey("skills")
"""The skills service."""
