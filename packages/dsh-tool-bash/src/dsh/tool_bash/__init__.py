"""The model-facing ``bash`` tool: a fresh managed ``DSH_*`` snapshot for every call."""

from ._errors import ArgumentError
from ._tool import BASH_DESCRIPTION, ShellTool, ShellToolConfig, TaskTable, install_shell_tools, plugin

__all__ = [
    "BASH_DESCRIPTION",
    "ArgumentError",
    "ShellTool",
    "ShellToolConfig",
    "TaskTable",
    "install_shell_tools",
    "plugin",
]
