"""Reading a finished hook's exit code and output the way its dialect does."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from ._dialect import Dialect, dialect_of
from ._outcome import HookReport
from ._payload import dsh_tool_input


def _read_json(stdout: str) -> Mapping[str, Any] | None:
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, Mapping) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def unknown_status(dialect: Dialect, event: str, command: str, stdout: str, stderr: str) -> HookReport:
    """A hook whose exit status another reaper took: an error, and at a gate a refusal (fail closed).

    Exit 2 blocks and exit 0 lets JSON decide; with the status lost neither can be told, so a
    ``PreToolUse`` or ``UserPromptSubmit`` hook never lets through what it may have refused.
    """
    base = HookReport(dialect, event, command, 255, stdout, stderr)
    why = "its exit status is unknown: another waitpid() in this process reaped it first"
    return _refusal(base, event, why, f"dsh cannot tell whether hook {command} allowed this: {why}; refused to be safe")


def _refusal(base: HookReport, event: str, why: str, reason: str) -> HookReport:
    """``base`` failed with ``why``; at a gate it also refuses, with ``reason``."""
    if event in dialect_of(base.dialect).gate_events:
        return base._replace(blocked=True, reason=reason, error=why)
    return base._replace(error=why)


def dialect_failed(
    dialect: Dialect,
    event: str,
    command: str,
    exc: Exception,
    exit_code: int | None = None,
    stdout: str = "",
    stderr: str = "",
) -> HookReport:
    """A hook whose dialect's own code raised (building its payload or environment, reading its
    output): a defect of the distribution that provides the dialect, never the hook's verdict.

    An error naming the dialect; at a gate also a refusal, since no guard's verdict could be read.
    """
    peer = dialect_of(dialect)
    why = (
        f"the {peer.peer} hook dialect ({dialect!r}) failed: {type(exc).__name__}: {exc}; "
        "fix or uninstall the distribution that provides it"
    )
    base = HookReport(dialect, event, command, exit_code, stdout, stderr)
    return _refusal(base, event, why, f"{why}; refused to be safe")


def not_started(
    dialect: Dialect, event: str, command: str, exit_code: int | None, stdout: str, stderr: str, why: str
) -> HookReport:
    """A hook dsh could not start (no file descriptors, no memory, its command or interpreter missing).

    A hook that never ran allowed nothing: at a gate it refuses; elsewhere it is an error, as any failure.
    """
    base = HookReport(dialect, event, command, exit_code, stdout, stderr)
    return _refusal(base, event, why, f"hook {command} {why}; refused, since a guard that did not run allowed nothing")


def oversized(
    dialect: Dialect, event: str, command: str, exit_code: int, stdout: str, stderr: str, limit: int
) -> HookReport:
    """A hook whose stdout passed ``limit`` characters: what it decided cannot be read whole."""
    base = HookReport(dialect, event, command, exit_code, stdout, stderr)
    why = f"printed more than the {limit} characters of stdout dsh reads from a hook; its output was not read"
    return _refusal(base, event, why, f"hook {command} {why}; refused to be safe")


def _permission_answer(
    dialect: Dialect, base: HookReport, output: Mapping[str, Any], specific: Mapping[str, Any], tool: str | None
) -> HookReport:
    """A PermissionRequest hook's answer: ``hookSpecificOutput.decision.behavior`` allow or deny.

    A dialect that reserves fields (``updatedInput``, ``updatedPermissions``, ``interrupt: true``)
    fails closed on them: such an answer denies. Without a decision the question stays open.
    """
    raw = specific.get("decision")
    answer: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    behavior = answer.get("behavior")
    stop = output.get("continue") is False
    base = base._replace(
        stop=stop,
        stop_reason=_text(output.get("stopReason")) if stop else None,
        system_message=_text(output.get("systemMessage")),
    )
    reserved = [k for k in ("updatedInput", "updatedPermissions") if answer.get(k) is not None]
    if answer.get("interrupt") is True:
        reserved.append("interrupt")
    peer = dialect_of(dialect)
    if peer.reserved_answer_fails_closed and behavior in ("allow", "deny") and reserved:
        why = f"a {peer.peer} PermissionRequest answer with {', '.join(reserved)} fails closed"
        return base._replace(blocked=True, decision="deny", reason=why)
    if behavior == "deny":
        reason = _text(answer.get("message")) or f"denied by PermissionRequest hook: {base.command}"
        return base._replace(blocked=True, decision="deny", reason=reason)
    if behavior == "allow":
        updated = answer.get("updatedInput")
        rewrite = dsh_tool_input(dialect, tool, updated) if isinstance(updated, Mapping) and tool else None
        return base._replace(decision="allow", updated_input=rewrite)
    return base


def interpret(
    dialect: Dialect,
    event: str,
    command: str,
    exit_code: int,
    stdout: str,
    stderr: str,
    tool: str | None = None,
) -> HookReport:
    """Read a finished hook's exit code and output by the common rules (the default of
    :meth:`~._dialect.HookDialect.interpret`), tuned by the dialect's flags."""
    base = HookReport(dialect, event, command, exit_code, stdout, stderr)
    peer = dialect_of(dialect)
    if exit_code == 2:
        why = stderr.strip()
        if not peer.blocks_without_reason and not why:
            return base._replace(error=f"exited 2 without a reason on stderr; {peer.peer} does not block on that")
        if event not in peer.blocking_events:
            return base._replace(error=f"exited 2 ({event} cannot block): {why[:500]}")
        return base._replace(blocked=True, reason=why or f"blocked by hook: {command}")
    if exit_code != 0:
        return base._replace(error=f"exited with status {exit_code}: {stderr.strip()[:500]}".rstrip(": "))
    output = _read_json(stdout)
    if output is None:
        text = stdout.strip()
        if peer.invalid_json_fails and text.startswith("{"):
            # Such a dialect fails a hook whose stdout looks like JSON but is not; others read it as text.
            return base._replace(error=f"printed invalid JSON on stdout: {text[:200]}")
        return base._replace(additional_context=text) if text and event in peer.context_events else base
    raw_specific = output.get("hookSpecificOutput")
    specific: Mapping[str, Any] = raw_specific if isinstance(raw_specific, Mapping) else {}
    decision: Literal["allow", "deny", "ask"] | None = None
    permission = specific.get("permissionDecision")
    if permission in ("allow", "deny", "ask"):
        decision = permission
    elif output.get("decision") == "approve" and event == "PreToolUse":
        decision = "allow"
    if event == "PermissionRequest":
        return _permission_answer(dialect, base, output, specific, tool)
    blocked = decision == "deny" or (output.get("decision") == "block" and event in peer.blocking_events)
    reason = None
    if blocked or decision == "ask":
        reason = _text(specific.get("permissionDecisionReason")) or _text(output.get("reason"))
    stop = output.get("continue") is False
    updated = specific.get("updatedInput")
    updated_input = None
    if isinstance(updated, Mapping) and event == "PreToolUse" and not blocked and tool is not None:
        updated_input = dsh_tool_input(dialect, tool, updated)
    return base._replace(
        blocked=blocked,
        reason=reason,
        stop=stop,
        stop_reason=_text(output.get("stopReason")) if stop else None,
        decision=decision,
        updated_input=updated_input,
        additional_context=_text(specific.get("additionalContext")),
        system_message=_text(output.get("systemMessage")),
    )
