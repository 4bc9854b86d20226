"""Running one command hook: its command line, one executor call, and the report of what it did."""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh.bash import BashExecRequest, Executor, LocalExecutor
from dsh.session.trace import current_trace

from ._decision import dialect_failed, not_started, oversized, unknown_status
from ._dialect import all_placeholders, dialect_of
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


@functools.cache
def _placeholder() -> re.Pattern[str]:
    """``${NAME}`` for the dialects' placeholders: substituted in an exec form's command and arguments
    (and a PowerShell command line); set in the hook's environment too, so bash expands them in a
    shell-form line."""
    return re.compile(r"\$\{(" + "|".join(map(re.escape, all_placeholders())) + r")\}")


_PS_QUOTE = re.compile("(['\u2018\u2019\u201a\u201b])")
"""The characters PowerShell's tokenizer takes for a single quote: the ASCII one and the typographic
ones (left, right, low-9, reversed). Inside a single-quoted string each is escaped by doubling it; an
undoubled U+2019 in a model's ``${tool_input.*}`` would end the string and run the rest on the host."""

_TOOL_INPUT = re.compile(r"\$\{tool_input\.([A-Za-z0-9_.\-]+)\}")


def _input_value(tool_input: Mapping[str, Any], path: str) -> str:
    value: Any = tool_input
    for key in path.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def substitute(text: str, env: Mapping[str, str], tool_input: Mapping[str, Any] | None = None) -> str:
    """``text`` with the dialects' ``${NAME}`` placeholders replaced from ``env`` (an unset one by
    nothing), and with ``tool_input``, each ``${tool_input.file_path}`` by that field of the call's
    input (as the peer's tool takes it; a non-string as JSON, a missing one by nothing)."""
    text = _placeholder().sub(lambda m: env.get(m.group(1), ""), text)
    if tool_input is not None:
        text = _TOOL_INPUT.sub(lambda m: _input_value(tool_input, m.group(1)), text)
    return text


def command_line(
    hook: HookCommand, env: Mapping[str, str] | None = None, tool_input: Mapping[str, Any] | None = None
) -> str:
    """The command line that runs ``hook`` with its placeholders substituted (see :func:`substitute`).

    The exec form is quoted so no shell interprets an argument; ``${tool_input.*}`` is substituted in
    its arguments only, as the peer does. A bash shell-form line is left to bash, which expands the
    placeholders from the hook's environment (a path is never re-read as shell syntax).
    """
    env = env or {}
    if hook.args is None:
        return substitute(hook.command, env) if hook.shell == "powershell" else hook.command
    words = [substitute(hook.command, env), *(substitute(a, env, tool_input or {}) for a in hook.args)]
    if hook.shell == "powershell":
        return "& " + " ".join("'" + _PS_QUOTE.sub(r"\1\1", w) + "'" for w in words)
    return "exec " + shlex.join(words)


def hook_request(
    hook: HookCommand,
    payload: str,
    cwd: str,
    env: Mapping[str, str],
    tool_input: Mapping[str, Any] | None = None,
    ambient: Mapping[str, str] | None = None,
) -> BashExecRequest:
    """The executor request that runs ``hook`` with ``payload`` on stdin, from ``ambient`` (None: this
    process's environment). The executor drops an outer harness's identity from it (every loaded
    dialect's :attr:`~._dialect.HookDialect.identity_variables`, see :func:`dsh.bash.harness_identity_keys`);
    ``env`` holds the hook's own dialect's. The hook gets the span running now (its tool call's, its
    turn's) as ``TRACEPARENT``, in the managed channel."""
    trace = current_trace.get()
    return BashExecRequest(
        command=command_line(hook, env, tool_input),
        cwd=cwd if Path(cwd).is_dir() else None,
        timeout=hook.timeout,
        env=env,
        dsh_env={} if trace is None else trace.carrier(),
        stdin=payload,
        shell="pwsh" if hook.shell == "powershell" else "bash",
        ambient=ambient,
    )


async def run_hook(
    executor: Executor,
    dialect: Dialect,
    event: str,
    hook: HookCommand,
    payload: str,
    cwd: str,
    env: Mapping[str, str],
    tool: str | None,
    tool_input: Mapping[str, Any] | None = None,
    ambient: Mapping[str, str] | None = None,
) -> HookReport:
    """Run ``hook`` with ``payload`` on stdin; every failure (cannot start, timeout) is the report's, never raised.

    ``tool_input`` is the call's input as the peer's tool takes it (for ``${tool_input.*}``).
    """
    request = hook_request(hook, payload, cwd, env, tool_input, ambient)
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
    peer = dialect_of(dialect)
    if result.exit_code in NOT_STARTED_STATUSES and event in peer.gate_events:
        why = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.exit_code}"]
        return not_started(
            dialect, event, hook.label, result.exit_code, result.stdout, result.stderr, f"could not start: {why[0]}"
        )
    try:
        return peer.interpret(event, hook.label, result.exit_code, result.stdout, result.stderr, tool, tool_input)
    except Exception as exc:  # the dialect's code, not the hook, failed: its verdict cannot be read
        return dialect_failed(dialect, event, hook.label, exc, result.exit_code, result.stdout, result.stderr)
