"""Where a hook event fires: the loop's :class:`dsh.agent.HookScope` (its seam), used here as it is."""

from dsh.agent import HookScope

__all__ = ["HookScope"]
