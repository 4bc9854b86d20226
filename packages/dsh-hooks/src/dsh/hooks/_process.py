"""Running one command hook: its command line, one executor call, and the report of what it did."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from dsh.bash import BashExecRequest, Executor

from ._decision import interpret, unknown_status
from ._outcome import HookReport
from ._table import Dialect, HookCommand


def command_line(hook: HookCommand) -> str:
    """The command line that runs ``hook`` (its exec form quoted so no shell interprets an argument)."""
    if hook.args is None:
        return hook.command
    if hook.shell == "powershell":
        words = ["'" + w.replace("'", "''") + "'" for w in (hook.command, *hook.args)]
        return "& " + " ".join(words)
    return "exec " + shlex.join((hook.command, *hook.args))


async def run_hook(
    executor: Executor,
    dialect: Dialect,
    event: str,
    hook: HookCommand,
    payload: str,
    cwd: str,
    env: Mapping[str, str],
    tool: str | None,
) -> HookReport:
    """Run ``hook`` with ``payload`` on stdin; every failure (cannot start, timeout) is the report's, never raised."""
    request = BashExecRequest(
        command=command_line(hook),
        cwd=cwd if Path(cwd).is_dir() else None,
        timeout=hook.timeout,
        env=env,
        stdin=payload,
        shell="pwsh" if hook.shell == "powershell" else "bash",
    )
    try:
        result = await executor.run(request)
    except Exception as exc:  # a hook that cannot start is that hook's failure, never the agent's
        return HookReport(dialect, event, hook.label, None, "", "", error=f"could not run: {exc}")
    if result.timed_out:
        return HookReport(
            dialect,
            event,
            hook.label,
            result.exit_code,
            result.stdout,
            result.stderr,
            timed_out=True,
            error=f"timed out after {hook.timeout:g} s and was killed",
        )
    if not result.status_known:
        return unknown_status(dialect, event, hook.label, result.stdout, result.stderr)
    return interpret(dialect, event, hook.label, result.exit_code, result.stdout, result.stderr, tool)
