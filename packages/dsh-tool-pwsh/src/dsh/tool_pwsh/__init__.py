"""The model-facing ``pwsh`` tool: the ``bash`` tool's contract on PowerShell.

It reuses :mod:`dsh.tool_bash`'s machinery with the pwsh flavour of the executor: a
non-interactive argv (``-NoLogo -NoProfile -NonInteractive``) and no ``TERM``.
"""

from __future__ import annotations

from dsh.bash import DSH_ENV_PREFIX
from dsh.bash_env import BASH_ENV
from dsh.core import Context, Plugin
from dsh.session import TOOLS
from dsh.tool_bash import ShellToolConfig, install_shell_tools

__all__ = ["PWSH_DESCRIPTION", "plugin"]

PWSH_DESCRIPTION = (
    "Run a command in a fresh, non-interactive PowerShell (pwsh) session and return its output and exit code. "
    "The working directory defaults to the session's; `workdir` overrides it. Set `run_in_background` "
    "for long-running commands and read them later with the companion output tool. "
    f"The harness describes the current session and environment through managed $env:{DSH_ENV_PREFIX}* "
    "environment variables, set anew for every call; inspect them "
    f"(for example `Get-ChildItem env:{DSH_ENV_PREFIX}*`) when you need facts about the current harness."
)


def _apply(ctx: Context, config: ShellToolConfig) -> None:
    install_shell_tools(ctx, name="pwsh", shell="pwsh", description=PWSH_DESCRIPTION, config=config)


plugin = Plugin(name="tool-pwsh", apply=_apply, Config=ShellToolConfig, inject=(BASH_ENV, TOOLS))
"""The ``tool-pwsh`` entry of the ``dsh.plugins`` group."""
