"""A `shell_executor` plugin whose `run` calls `sys.exit()` (for the serve containment test)."""

from __future__ import annotations

import sys
from typing import NoReturn

from dsh.bash import SHELL_EXECUTOR, BashExecRequest
from dsh.core import Context, Plugin


class ExitingExecutor:
    async def run(self, request: BashExecRequest) -> NoReturn:
        sys.exit(7)

    async def start(self, request: BashExecRequest) -> NoReturn:
        sys.exit(7)


def _apply(ctx: Context, config: None) -> None:
    ctx.provide(SHELL_EXECUTOR, ExitingExecutor())  # type: ignore[arg-type]


plugin = Plugin(name="exiting-executor", apply=_apply)
