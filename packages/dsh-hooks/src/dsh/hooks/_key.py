"""The ``hooks`` service key (the loop's seam, :data:`dsh.agent.HOOKS`) and typed access to the runner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh.agent import HOOKS
from dsh.core import Context

if TYPE_CHECKING:
    from ._service import HookRunner

__all__ = ["HOOKS", "hook_runner"]


def hook_runner(ctx: Context) -> HookRunner | None:
    """The ``hooks`` service of ``ctx`` when it is dsh-hooks' runner (what a host asks of it beyond
    the loop's seam: the files it read, its warnings), else None."""
    from ._service import HookRunner

    found = ctx.get(HOOKS)
    return found if isinstance(found, HookRunner) else None
