"""The ``hooks`` service key (the loop's seam, :data:`dsh.agent.HOOKS`) and typed access to the plugin's service."""

from dsh.agent import HOOKS
from dsh.core import Context

from ._hooks import Hooks

__all__ = ["HOOKS", "hook_runner"]


def hook_runner(ctx: Context) -> Hooks | None:
    """The ``hooks`` service of ``ctx`` when it is the hooks plugin's (what a host asks of it beyond
    the loop's seam: its ``tables`` with the files they were read from and their warnings, the runner
    once one was built), else None."""
    found = ctx.get(HOOKS)
    return found if isinstance(found, Hooks) else None
