"""What runs hooks: :class:`HookRunner` (it meets :class:`dsh.agent.LoopHooks` on its own), the
report of one hook's run (:class:`HookReport`) and an event's merged verdict (:class:`HookOutcome`).

The hooks plugin's service (:class:`dsh.hooks.Hooks`) builds a runner once one of its tables holds a
hook; a host or test that runs hooks itself imports them from here.
"""

from ._outcome import HookOutcome, HookReport
from ._service import HookRunner

__all__ = ["HookOutcome", "HookReport", "HookRunner"]
