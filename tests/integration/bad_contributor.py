"""A plugin whose contributor returns a key it never declared (for the tool tests)."""

from dsh.bash_env import BASH_ENV, FunctionContributor
from dsh.core import Context, Plugin


def _apply(ctx: Context, config: None) -> None:
    ctx.require(BASH_ENV).register(
        FunctionContributor("bad", {"DSH_DECLARED": "d"}, lambda e: {"DSH_NOT_DECLARED": "x"})
    )


plugin = Plugin(name="bad", apply=_apply, inject=(BASH_ENV,))
