"""Running hooks: one executor call per matching command, outcomes read in the dialect's terms."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from dsh.bash import BashExecRequest, Executor, LocalExecutor
from dsh.core import Context, DshError, Plugin, ServiceKey
from dsh.session import SESSION_PERSISTENCE, SessionHeader

from ._config import Dialect, HookCommand, HookTable, load_hook_table
from ._payload import TOOL_NAMES, HookFacts, build_payload

log = logging.getLogger("dsh.hooks")

DEFAULT_TIMEOUT = 60.0


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
    """Why the hook failed without deciding anything (timeout, crash, bad JSON)."""
    blocked: bool = False
    reason: str | None = None
    stop: bool = False
    """The hook asked the agent to stop (``"continue": false``)."""
    additional_context: str | None = None


@dataclass(frozen=True)
class HookOutcome:
    """The merged result of every hook that ran for one event."""

    reports: tuple[HookReport, ...] = ()

    @property
    def blocked(self) -> bool:
        """Whether any hook blocked or denied."""
        return any(r.blocked for r in self.reports)

    @property
    def stop(self) -> bool:
        """Whether any hook asked the agent to stop."""
        return any(r.stop for r in self.reports)

    @property
    def reason(self) -> str:
        """The blocking reasons, joined."""
        return "\n".join(r.reason or f"blocked by hook: {r.command}" for r in self.reports if r.blocked or r.stop)

    @property
    def failures(self) -> list[HookReport]:
        """Hooks that timed out, crashed or answered nonsense."""
        return [r for r in self.reports if r.error is not None]

    @property
    def additional_context(self) -> str:
        """Context the hooks asked to add for the model."""
        return "\n".join(r.additional_context for r in self.reports if r.additional_context)


def _read_json(stdout: str) -> Mapping[str, Any] | None:
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, Mapping) else None


def interpret(dialect: Dialect, event: str, command: str, exit_code: int, stdout: str, stderr: str) -> HookReport:
    """Read a finished hook's exit code and output the way its dialect does."""
    report = partial(HookReport, dialect, event, command, exit_code, stdout, stderr)
    if exit_code == 2:
        why = stderr.strip()
        if dialect == "codex" and not why:
            return report(error="exited 2 without a reason on stderr; Codex does not block on that")
        return report(blocked=True, reason=why or f"blocked by hook: {command}")
    if exit_code != 0:
        return report(error=f"exited with status {exit_code}: {stderr.strip()[:500]}")
    output = _read_json(stdout)
    if output is None:
        return report()
    raw_specific = output.get("hookSpecificOutput")
    specific: Mapping[str, Any] = raw_specific if isinstance(raw_specific, Mapping) else {}
    blocked = output.get("decision") == "block" or specific.get("permissionDecision") == "deny"
    stop = output.get("continue") is False
    reason: Any = None
    if blocked:
        reason = specific.get("permissionDecisionReason") or output.get("reason")
    elif stop:
        reason = output.get("stopReason")
    context = specific.get("additionalContext")
    return report(
        blocked=blocked,
        stop=stop,
        reason=str(reason) if reason else None,
        additional_context=context if isinstance(context, str) else None,
    )


class HooksConfig(BaseModel):
    """Config of the ``hooks`` plugin: each dialect inline or as a path to the peer's file."""

    model_config = ConfigDict(extra="forbid")

    claude: dict[str, Any] | str | None = None
    codex: dict[str, Any] | str | None = None
    model: str = "dsh-scripted"
    """The model name Codex payloads carry."""
    permission_mode: Literal["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"] = "default"
    base_dir: str | None = None
    """Directory relative hook-file paths resolve against; default the working directory."""
    credential_pattern: str | None = None
    """Ambient names to scrub from hooks. Default none: hooks are the user's own scripts and, as in
    the peers, see the user's environment (credentials included). ``DSH_*`` is always removed."""


class HookRunner:
    """The ``hooks`` service: fires events at the configured hooks of both dialects."""

    def __init__(
        self,
        ctx: Context,
        tables: Mapping[Dialect, HookTable],
        *,
        model: str = "dsh-scripted",
        permission_mode: str = "default",
        executor: Executor | None = None,
    ) -> None:
        self._ctx = ctx
        self.tables = dict(tables)
        self.model = model
        self.permission_mode = permission_mode
        self.executor: Executor = executor or LocalExecutor(credential_pattern=None)

    def transcript_path(self, header: SessionHeader) -> str | None:
        """The transcript path from the current persistence's ``locate()``; never creates anything."""
        backend = self._ctx.get(SESSION_PERSISTENCE)
        location = None if backend is None else backend.locate(header)
        return None if location is None else location.path

    def matching(self, dialect: Dialect, event: str, match_value: str | None) -> list[HookCommand]:
        """The commands of ``dialect`` that ``event`` runs for ``match_value``."""
        groups = self.tables.get(dialect, HookTable()).hooks.get(event, [])
        return [hook for group in groups if group.matches(match_value) for hook in group.hooks]

    def facts(
        self, event: str, header: SessionHeader, *, turn_id: str | None = None, fields: Mapping[str, Any] | None = None
    ) -> HookFacts:
        """The dialect-neutral facts of an event in ``header``'s session."""
        return HookFacts(
            event=event,
            session_id=header.id,
            cwd=header.cwd,
            transcript_path=self.transcript_path(header),
            model=self.model,
            permission_mode=self.permission_mode,
            turn_id=turn_id,
            fields=dict(fields or {}),
        )

    async def dispatch(
        self,
        event: str,
        header: SessionHeader,
        *,
        turn_id: str | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> HookOutcome:
        """Run every matching hook of both dialects in parallel and merge their outcomes."""
        fields = dict(fields or {})
        match_value: str | None = None
        if "tool_name" in fields:
            match_value = TOOL_NAMES.get(fields["tool_name"], fields["tool_name"])
        elif event == "SessionStart":
            match_value = fields.get("source")
        jobs: list[Coroutine[Any, Any, HookReport]] = []
        facts: HookFacts | None = None
        for dialect in ("claude", "codex"):
            hooks = self.matching(dialect, event, match_value)
            if not hooks:
                continue
            facts = facts or self.facts(event, header, turn_id=turn_id, fields=fields)
            payload = json.dumps(build_payload(dialect, facts))
            jobs.extend(self._run(dialect, event, hook, payload, header.cwd) for hook in hooks)
        if not jobs:
            return HookOutcome()
        reports = await asyncio.gather(*jobs)
        for report in reports:
            if report.error is not None:
                log.warning("%s hook for %s (%s) failed: %s", report.dialect, event, report.command, report.error)
        return HookOutcome(tuple(reports))

    async def _run(self, dialect: Dialect, event: str, hook: HookCommand, payload: str, cwd: str) -> HookReport:
        env = {"CLAUDE_PROJECT_DIR": cwd} if dialect == "claude" else {}
        request = BashExecRequest(
            command=hook.command,
            cwd=cwd if Path(cwd).is_dir() else None,
            timeout=hook.timeout or DEFAULT_TIMEOUT,
            env=env,
            stdin=payload,
        )
        try:
            result = await self.executor.run(request)
        except DshError as exc:
            return HookReport(dialect, event, hook.command, None, "", "", error=str(exc))
        if result.timed_out:
            return HookReport(
                dialect,
                event,
                hook.command,
                result.exit_code,
                result.stdout,
                result.stderr,
                timed_out=True,
                error=f"timed out after {request.timeout:g} s and was killed",
            )
        return interpret(dialect, event, hook.command, result.exit_code, result.stdout, result.stderr)


HOOKS: ServiceKey[HookRunner] = ServiceKey("hooks")
"""The hook runner service."""


def _apply(ctx: Context, config: HooksConfig) -> None:
    base = Path(config.base_dir).expanduser() if config.base_dir else None
    tables: dict[Dialect, HookTable] = {
        "claude": load_hook_table("claude", config.claude, base),
        "codex": load_hook_table("codex", config.codex, base),
    }
    executor = LocalExecutor(credential_pattern=config.credential_pattern)
    ctx.provide(
        HOOKS, HookRunner(ctx, tables, model=config.model, permission_mode=config.permission_mode, executor=executor)
    )


plugin = Plugin(name="hooks", apply=_apply, Config=HooksConfig)
"""The ``hooks`` entry of the ``dsh.plugins`` group."""


def reports_as_data(reports: Sequence[HookReport]) -> list[dict[str, Any]]:
    """Reports as plain data for a transcript event."""
    return [
        {
            "dialect": r.dialect,
            "command": r.command,
            "exit_code": r.exit_code,
            "blocked": r.blocked,
            "stop": r.stop,
            "reason": r.reason,
            "error": r.error,
        }
        for r in reports
    ]
