"""What hooks decided: one report per hook run, merged per event, read in each dialect's terms."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ._config import Dialect
from ._payload import dsh_tool_input

CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})
"""Events whose plain (non-JSON) stdout is context for the model, in both dialects."""

BLOCKING_EVENTS = frozenset(
    {"PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "Stop", "SubagentStop"}
)
"""Events where exit 2 or ``decision: "block"`` acts (after a call: its reason is added to the result
the model reads); elsewhere exit 2 is only reported to the user."""


@dataclass(frozen=True)
class HookReport:
    """How one hook command ran and what it decided."""

    dialect: Dialect
    event: str
    command: str
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    error: str | None = None
    """Why the hook failed without deciding anything (cannot run, crash, timeout, bad output)."""
    blocked: bool = False
    reason: str | None = None
    stop: bool = False
    """The hook asked the agent to stop (``"continue": false``); ``stop_reason`` says why."""
    stop_reason: str | None = None
    decision: Literal["allow", "deny", "ask"] | None = None
    """A PreToolUse permission decision."""
    updated_input: Mapping[str, Any] | None = None
    """A PreToolUse ``updatedInput``, already in dsh's terms (seconds, ``agent_type``)."""
    additional_context: str | None = None
    system_message: str | None = None
    background: bool = False
    """An ``async`` hook: reported when it finished, never deciding anything."""
    finished: int = 0
    """Completion order among the hooks of one event (a later ``updatedInput`` wins)."""


@dataclass(frozen=True)
class Notice:
    """A line for the user: a hook's ``systemMessage`` or a warning about a hook that failed."""

    kind: Literal["message", "warning"]
    text: str


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


def interpret(
    dialect: Dialect,
    event: str,
    command: str,
    exit_code: int,
    stdout: str,
    stderr: str,
    tool: str | None = None,
) -> HookReport:
    """Read a finished hook's exit code and output the way its dialect does."""
    base = HookReport(dialect, event, command, exit_code, stdout, stderr)
    if exit_code == 2:
        why = stderr.strip()
        if dialect == "codex" and not why:
            return replace(base, error="exited 2 without a reason on stderr; Codex does not block on that")
        if event not in BLOCKING_EVENTS:
            return replace(base, error=f"exited 2 ({event} cannot block): {why[:500]}")
        return replace(base, blocked=True, reason=why or f"blocked by hook: {command}")
    if exit_code != 0:
        return replace(base, error=f"exited with status {exit_code}: {stderr.strip()[:500]}".rstrip(": "))
    output = _read_json(stdout)
    if output is None:
        text = stdout.strip()
        if dialect == "codex" and text.startswith("{"):
            # Codex fails a hook whose stdout looks like JSON but is not; Claude Code reads it as text.
            return replace(base, error=f"printed invalid JSON on stdout: {text[:200]}")
        return replace(base, additional_context=text) if text and event in CONTEXT_EVENTS else base
    raw_specific = output.get("hookSpecificOutput")
    specific: Mapping[str, Any] = raw_specific if isinstance(raw_specific, Mapping) else {}
    decision: Literal["allow", "deny", "ask"] | None = None
    permission = specific.get("permissionDecision")
    if permission in ("allow", "deny", "ask"):
        decision = permission
    elif output.get("decision") == "approve" and event == "PreToolUse":
        decision = "allow"
    blocked = decision == "deny" or (output.get("decision") == "block" and event in BLOCKING_EVENTS)
    reason = None
    if blocked or decision == "ask":
        reason = _text(specific.get("permissionDecisionReason")) or _text(output.get("reason"))
    stop = output.get("continue") is False
    updated = specific.get("updatedInput")
    updated_input = None
    if isinstance(updated, Mapping) and event == "PreToolUse" and not blocked and tool is not None:
        updated_input = dsh_tool_input(dialect, tool, updated)
    return replace(
        base,
        blocked=blocked,
        reason=reason,
        stop=stop,
        stop_reason=_text(output.get("stopReason")) if stop else None,
        decision=decision,
        updated_input=updated_input,
        additional_context=_text(specific.get("additionalContext")),
        system_message=_text(output.get("systemMessage")),
    )


@dataclass(frozen=True)
class HookOutcome:
    """The merged result of every hook that ran for one event."""

    reports: tuple[HookReport, ...] = ()
    ask: Literal["deny", "allow"] = "deny"
    """What a PreToolUse ``ask`` means with no one to approve it (``hooks.ask`` in the config)."""
    warnings: tuple[str, ...] = field(default=())
    """Problems outside any one hook's run (a ``CLAUDE_ENV_FILE`` export dsh refused, say)."""

    @property
    def _deciding(self) -> list[HookReport]:
        return [r for r in self.reports if not r.background]

    @property
    def denied_by_ask(self) -> bool:
        """A hook asked for approval, nobody can give it, and the policy is to deny."""
        deciding = self._deciding
        return (
            self.ask == "deny" and any(r.decision == "ask" for r in deciding) and not any(r.blocked for r in deciding)
        )

    @property
    def blocked(self) -> bool:
        """Whether any hook blocked or denied (an unanswerable ``ask`` counts, by default)."""
        return any(r.blocked for r in self._deciding) or self.denied_by_ask

    @property
    def reason(self) -> str:
        """The blocking reasons, joined."""
        lines = [r.reason or f"blocked by hook: {r.command}" for r in self._deciding if r.blocked]
        if self.denied_by_ask:
            for r in self._deciding:
                if r.decision == "ask":
                    why = f" ({r.reason})" if r.reason else ""
                    lines.append(f"a hook asked for approval{why} and no one can approve here, so it is denied")
        return "\n".join(lines)

    @property
    def stop(self) -> bool:
        """Whether any hook asked the agent to stop (``continue: false``)."""
        return any(r.stop for r in self._deciding)

    @property
    def stop_reason(self) -> str:
        """Why the hooks stopped the agent."""
        return "\n".join(r.stop_reason or f"stopped by hook: {r.command}" for r in self._deciding if r.stop)

    @property
    def updated_input(self) -> Mapping[str, Any] | None:
        """The rewrite of the hook that finished last, unless the call is blocked."""
        if self.blocked:
            return None
        rewrites = [r for r in self._deciding if r.updated_input is not None]
        return max(rewrites, key=lambda r: r.finished).updated_input if rewrites else None

    @property
    def context(self) -> list[str]:
        """Context the hooks asked to add for the model (``additionalContext``, plain stdout)."""
        return [r.additional_context for r in self.reports if r.additional_context]

    @property
    def additional_context(self) -> str:
        """:attr:`context`, joined."""
        return "\n".join(self.context)

    @property
    def failures(self) -> list[HookReport]:
        """Hooks that could not run, crashed, timed out or answered nonsense."""
        return [r for r in self.reports if r.error is not None]

    def notices(self) -> list[Notice]:
        """What to show the user: each ``systemMessage``, and one warning per failed hook."""
        notes = [Notice("message", r.system_message) for r in self.reports if r.system_message]
        for r in self.failures:
            notes.append(Notice("warning", f"{r.dialect} {r.event} hook `{r.command}` failed: {r.error}"))
        notes.extend(Notice("warning", w) for w in self.warnings)
        return notes

    def merged(self, other: HookOutcome) -> HookOutcome:
        """Both outcomes' reports and warnings."""
        return HookOutcome(self.reports + other.reports, self.ask, self.warnings + other.warnings)


def reports_as_data(reports: Sequence[HookReport]) -> list[dict[str, Any]]:
    """Reports as plain data for a transcript event."""
    rows = []
    for r in reports:
        row: dict[str, Any] = {
            "dialect": r.dialect,
            "event": r.event,
            "command": r.command,
            "exit_code": r.exit_code,
            "blocked": r.blocked,
            "stop": r.stop,
            "reason": r.reason,
            "error": r.error,
        }
        extras = {
            "stop_reason": r.stop_reason,
            "decision": r.decision,
            "updated_input": None if r.updated_input is None else dict(r.updated_input),
            "additional_context": r.additional_context,
            "system_message": r.system_message,
            "timed_out": r.timed_out or None,
            "background": r.background or None,
        }
        row.update({k: v for k, v in extras.items() if v is not None})
        rows.append(row)
    return rows
