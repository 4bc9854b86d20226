"""Running one command hook: its command line, one executor call, and the report of what it did."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from dsh.bash import BashExecRequest, Executor, LocalExecutor

from ._decision import GATE_EVENTS, interpret, not_started, oversized, unknown_status
from ._outcome import HookReport
from ._table import Dialect, HookCommand

HOOK_OUTPUT_LIMIT = 1 << 20
"""Characters of each stream of a hook's output dsh reads whole (1 MiB of ASCII): a decision, an
``updatedInput`` or a reason of any real size. Longer output is a failure (refusing at a gate), never
a decision read from a cut text."""

NOT_STARTED_STATUSES = frozenset({126, 127})
"""The shell's statuses for a command (or the interpreter its ``#!`` line names) that was not found
or cannot be executed: at a gate such a hook never ran, so it cannot have allowed anything."""


def hook_executor(*, credential_pattern: str | None = None, spill_dir: str | Path | None = None) -> LocalExecutor:
    """The executor hooks run on: their output read whole up to :data:`HOOK_OUTPUT_LIMIT` characters."""
    return LocalExecutor(credential_pattern=credential_pattern, max_output=HOOK_OUTPUT_LIMIT, spill_dir=spill_dir)


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
    except Exception as exc:  # a hook that cannot start (no fds, no memory) is that hook's failure, never the agent's
        return not_started(dialect, event, hook.label, None, "", "", f"could not run: {exc}")
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
    if result.stdout_spill is not None or len(result.stdout) > HOOK_OUTPUT_LIMIT:
        return oversized(dialect, event, hook.label, result.exit_code, result.stdout, result.stderr, HOOK_OUTPUT_LIMIT)
    if result.exit_code in NOT_STARTED_STATUSES and event in GATE_EVENTS:
        why = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.exit_code}"]
        return not_started(
            dialect, event, hook.label, result.exit_code, result.stdout, result.stderr, f"could not start: {why[0]}"
        )
    return interpret(dialect, event, hook.label, result.exit_code, result.stdout, result.stderr, tool)
