"""The ``hooks`` service key: all a host needs to look the runner up (importing it costs nothing more)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh.core import ServiceKey

if TYPE_CHECKING:
    from ._service import HookRunner

HOOKS: ServiceKey[HookRunner] = ServiceKey("hooks")
"""The hook runner service; absent when the deployment configures no hooks."""
