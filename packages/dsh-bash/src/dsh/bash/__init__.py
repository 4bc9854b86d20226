"""The shell seam of dsh: the managed ``DSH_*`` channel, requests, and the local executor.

:class:`BackgroundProcess` and :class:`CommandCancelled` resolve lazily: they are asyncio's, and a
one-shot run imports no asyncio.
"""

from typing import TYPE_CHECKING

from dsh.paths.interrupts import Interrupted, Interrupts, interrupted_status, interruption

from ._capture import Capture
from ._child import UNKNOWN_STATUS, Ended
from ._env import (
    DSH_ENV_PREFIX,
    EXPORTED_FUNCTION_PREFIX,
    SHELL_CODE_KEYS,
    Shell,
    declare_harness_identity,
    harness_identity_keys,
    is_managed_key,
)
from ._errors import ChannelError, ExecError
from ._local import (
    SHELL_EXECUTOR,
    Executor,
    ExecutorSettings,
    LocalExecutor,
    LocalExecutorConfig,
    check_output_limits,
    executor_options,
    local_executor_plugin,
)
from ._request import BashExecRequest, BashExecSpec, ExecResult, interrupted_result
from ._world import LOCAL_WORLD, Access, Mount, World, WorldKind, world_of

if TYPE_CHECKING:
    from ._aio import BackgroundProcess, CommandCancelled

__all__ = [
    "DSH_ENV_PREFIX",
    "EXPORTED_FUNCTION_PREFIX",
    "LOCAL_WORLD",
    "SHELL_CODE_KEYS",
    "SHELL_EXECUTOR",
    "UNKNOWN_STATUS",
    "Access",
    "BackgroundProcess",
    "BashExecRequest",
    "BashExecSpec",
    "Capture",
    "ChannelError",
    "CommandCancelled",
    "Ended",
    "ExecError",
    "ExecResult",
    "Executor",
    "ExecutorSettings",
    "Interrupted",
    "Interrupts",
    "LocalExecutor",
    "LocalExecutorConfig",
    "Mount",
    "Shell",
    "World",
    "WorldKind",
    "check_output_limits",
    "declare_harness_identity",
    "executor_options",
    "harness_identity_keys",
    "interrupted_result",
    "interrupted_status",
    "interruption",
    "is_managed_key",
    "local_executor_plugin",
    "world_of",
]


def __getattr__(name: str) -> object:
    if name in ("BackgroundProcess", "CommandCancelled"):
        from . import _aio

        return getattr(_aio, name)
    raise AttributeError(f"module 'dsh.bash' has no attribute {name!r}")
