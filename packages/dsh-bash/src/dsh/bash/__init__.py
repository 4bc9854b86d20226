"""The shell seam of dsh: the managed ``DSH_*`` channel, requests, and the local executor.

What needs asyncio (waiting under an event loop, :class:`~dsh.bash.aio.BackgroundProcess`,
:class:`~dsh.bash.aio.CommandCancelled`) is :mod:`dsh.bash.aio`'s, imported by what uses it: a
one-shot run, driven without an event loop, imports no asyncio.
"""

from dsh.paths.interrupts import (
    Interrupted,
    Interrupts,
    driven_blocking,
    interrupted_status,
    interruption,
    run_blocking,
)

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

__all__ = [
    "DSH_ENV_PREFIX",
    "EXPORTED_FUNCTION_PREFIX",
    "LOCAL_WORLD",
    "SHELL_CODE_KEYS",
    "SHELL_EXECUTOR",
    "UNKNOWN_STATUS",
    "Access",
    "BashExecRequest",
    "BashExecSpec",
    "Capture",
    "ChannelError",
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
    "driven_blocking",
    "executor_options",
    "harness_identity_keys",
    "interrupted_result",
    "interrupted_status",
    "interruption",
    "is_managed_key",
    "local_executor_plugin",
    "run_blocking",
    "world_of",
]
