"""What hooks decided: one report per hook run (:class:`HookReport`) merged per event into the verdict
(:class:`HookOutcome`), and the lines for the user (:class:`Notice`).

How a finished hook's exit code and output become a report is :mod:`._decision`.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from dsh.agent import STOP_BLOCK_CAP, Notice

if TYPE_CHECKING:
    from ._table import Dialect

__all__ = ["STOP_BLOCK_CAP", "HookOutcome", "HookReport", "Notice"]


class HookReport(NamedTuple):
    """How one hook command ran and what it decided."""

    dialect: "Dialect"
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

    def as_data(self) -> dict[str, Any]:
        """This report as plain data for a transcript's ``hook/result`` event."""
        row: dict[str, Any] = {
            "dialect": self.dialect,
            "event": self.event,
            "command": self.command,
            "exit_code": self.exit_code,
            "blocked": self.blocked,
            "stop": self.stop,
            "reason": self.reason,
            "error": self.error,
        }
        extras = {
            "stop_reason": self.stop_reason,
            "decision": self.decision,
            "updated_input": None if self.updated_input is None else dict(self.updated_input),
            "additional_context": self.additional_context,
            "system_message": self.system_message,
            "timed_out": self.timed_out or None,
            "background": self.background or None,
            # What the hook printed on stderr, whatever its status (exit 0 included: the peers show it
            # in verbose mode, and a hook's own diagnostics are otherwise lost).
            "stderr": self.stderr or None,
        }
        row.update({k: v for k, v in extras.items() if v is not None})
        return row


class HookOutcome(NamedTuple):
    """The merged result of every hook that ran for one event."""

    reports: tuple[HookReport, ...] = ()
    ask: Literal["deny", "allow"] = "deny"
    """What a PreToolUse ``ask`` means with no one to approve it (``hooks.ask`` in the config)."""
    warnings: tuple[str, ...] = ()
    """Problems outside any one hook's run (an env file export dsh refused, say)."""

    @property
    def _deciding(self) -> list[HookReport]:
        return [r for r in self.reports if not r.background]

    @property
    def denied_by_ask(self) -> bool:
        """A hook asked for approval, nobody can give it, and the policy is to deny."""
        deciding = self._deciding
        if not any(r.decision == "ask" for r in deciding) or any(r.blocked for r in deciding):
            return False
        return self.ask == "deny" and not self.permission_granted

    @property
    def asked(self) -> bool:
        """A PreToolUse hook asked for approval and nothing refused the call: a PermissionRequest to put."""
        deciding = self._deciding
        return any(r.decision == "ask" for r in deciding) and not any(r.blocked or r.stop for r in deciding)

    @property
    def permission_granted(self) -> bool:
        """A PermissionRequest hook allowed the call (it answered the ask)."""
        return any(r.event == "PermissionRequest" and r.decision == "allow" for r in self._deciding)

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

    def merged(self, other: "HookOutcome") -> "HookOutcome":
        """Both outcomes' reports and warnings."""
        return HookOutcome(self.reports + other.reports, self.ask, self.warnings + other.warnings)
