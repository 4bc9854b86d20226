"""Errors of the managed-variable registry, each with its subject as attributes.

DshError (dsh.core)
├── ContributorError   .contributor, .key: a declaration is malformed or conflicts with another
└── CollectionError    .contributor, .key: a contributor failed while a snapshot was collected
"""

from __future__ import annotations

from dsh.core import DshError


class ContributorError(DshError):
    """A contributor declaration is malformed or conflicts with another."""

    def __init__(self, message: str, *, contributor: str | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.contributor = contributor
        """The contributor's name, when it has one."""
        self.key = key
        """The ``DSH_*`` key at fault, when one is."""


class CollectionError(DshError):
    """A contributor failed while a snapshot was being collected."""

    def __init__(self, message: str, *, contributor: str | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.contributor = contributor
        """The contributor that failed."""
        self.key = key
        """The key its output got wrong, when one."""
