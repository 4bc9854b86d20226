"""Errors the loader raises, each with its subject as attributes.

DshError (dsh.core)
├── DiscoveryError      .group, .name: an entry point is claimed twice, missing, or fails to import
├── DeploymentError     .source: a deployment file or structure is invalid (message names entry and field)
└── BootError           .source, .problems: entries ended failed or pending
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh.core import DshError


class DiscoveryError(DshError):
    """An entry point is claimed by two distributions, cannot be found, or failed to load."""

    def __init__(self, message: str, *, group: str, name: str) -> None:
        super().__init__(message)
        self.group = group
        self.name = name


class DeploymentError(DshError):
    """A deployment file or structure is invalid; the message names the file, entry id and field."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


class BootError(DshError):
    """Composition ended with entries failed or pending; the message lists every one."""

    def __init__(self, message: str, *, source: str, problems: Sequence[str]) -> None:
        super().__init__(message)
        self.source = source
        self.problems = tuple(problems)
