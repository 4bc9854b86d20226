"""The shell seam of dsh: the managed ``DSH_*`` channel, requests, and the local executor."""

from ._env import (
    DEFAULT_CREDENTIAL_PATTERN,
    DSH_ENV_PREFIX,
    TERMINAL_ENV,
    Shell,
    build_child_env,
    check_channels,
    compile_credential_pattern,
    is_managed_key,
)
from ._errors import ChannelError, ExecError
from ._local import (
    AMBIENT_ENV,
    DEFAULT_MAX_OUTPUT,
    SHELL_EXECUTOR,
    BackgroundProcess,
    Executor,
    LocalExecutor,
    LocalExecutorConfig,
    local_executor_plugin,
    shell_argv,
)
from ._request import BashExecRequest, BashExecSpec, ExecResult

__all__ = [
    "AMBIENT_ENV",
    "DEFAULT_CREDENTIAL_PATTERN",
    "DEFAULT_MAX_OUTPUT",
    "DSH_ENV_PREFIX",
    "SHELL_EXECUTOR",
    "TERMINAL_ENV",
    "BackgroundProcess",
    "BashExecRequest",
    "BashExecSpec",
    "ChannelError",
    "ExecError",
    "ExecResult",
    "Executor",
    "LocalExecutor",
    "LocalExecutorConfig",
    "Shell",
    "build_child_env",
    "check_channels",
    "compile_credential_pattern",
    "is_managed_key",
    "local_executor_plugin",
    "shell_argv",
]
