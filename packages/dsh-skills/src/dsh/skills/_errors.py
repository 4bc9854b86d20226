"""The skills layer's error, with its subject as attributes.

DshError (dsh.core)
└── SkillError   .path, .source: a malformed SKILL.md, or a skill source name that is blank or reserved

A source name another plugin already registered is dsh.core's ``RegistrationConflictError``
(``.kind``, ``.key``, ``.owner``), as for every keyed registry.
"""

from __future__ import annotations

from dsh.core import DshError


class SkillError(DshError):
    """A skill file is malformed, or a skill source cannot be registered."""

    def __init__(self, message: str, *, path: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        """The ``SKILL.md`` at fault, when a file is."""
        self.source = source
        """The skill source (or entry point) name at fault, when one is."""
