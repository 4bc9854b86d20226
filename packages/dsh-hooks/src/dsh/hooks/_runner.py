"""Running hooks: one executor call per matching command, outcomes read in the dialect's terms.

The agent loop talks to :class:`HookRunner` through one method per lifecycle point
(``session_start``, ``user_prompt``, ``pre_tool``, ``post_tool``, ``stop``, ``subagent_start``,
``session_end``); the runner picks each dialect's event (``PostToolUseFailure`` for Claude Code,
``PostToolUse`` for Codex; ``Stop`` for the main agent, ``SubagentStop`` inside a subagent), the
hooks that match, and merges what they decided into a :class:`HookOutcome`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from dsh.bash import DSH_ENV_PREFIX, BashExecRequest, Executor, LocalExecutor, is_managed_key
from dsh.core import DSH_HOME, Context, Plugin, ServiceKey
from dsh.paths import UntrustedPathError, check_trusted, ensure_private_dir
from dsh.session import SESSION_PERSISTENCE, SessionHeader

from ._config import Dialect, HookCommand, HookTable, load_hook_table
from ._outcome import HookOutcome, HookReport, interpret
from ._payload import HookFacts, build_payload, peer_tool_input, tool_subjects
from ._rules import parse_rule, rule_matches

log = logging.getLogger("dsh.hooks")

DIALECTS: tuple[Dialect, ...] = ("claude", "codex")
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
"""Events where a Claude Code ``if`` rule is checked (it is ignored on the others)."""

_ENV_SPLIT = "__dsh_env_file_split__"
_SHELL_STATE = frozenset({"_", "SHLVL", "PWD", "OLDPWD", "SHELLOPTS", "BASHOPTS", "PS1", "PS2", "PS4", "IFS"})


@dataclass(frozen=True)
class HookScope:
    """Where an event fires: the session whose identity payloads carry, and the agent inside it."""

    header: SessionHeader
    turn_id: str | None = None
    agent_id: str | None = None
    """Set inside a subagent (the subagent's session id), with ``agent_type``."""
    agent_type: str | None = None
    parent: HookScope | None = None
    """The spawning agent's scope, inside a subagent: ``SubagentStop`` carries its identity."""

    def agent_fields(self) -> dict[str, Any]:
        """``agent_id`` and ``agent_type`` when inside a subagent, else nothing."""
        return {} if self.agent_id is None else {"agent_id": self.agent_id, "agent_type": self.agent_type}


@dataclass(frozen=True, kw_only=True)
class HooksConfig:
    """Config of the ``hooks`` plugin: each dialect inline or as a path to the peer's file."""

    claude: dict[str, Any] | str | None = None
    codex: dict[str, Any] | str | None = None
    model: str = "dsh-scripted"
    """The model name Codex payloads carry."""
    permission_mode: Literal["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"] = "default"
    ask: Literal["deny", "allow"] = "deny"
    """What a PreToolUse ``ask`` decision means: nobody can approve in dsh, so by default a denial."""
    base_dir: str | None = None
    """Directory relative hook-file paths resolve against; default the working directory."""
    credential_pattern: str | None = None
    """Ambient names to scrub from hooks. Default none: hooks are the user's own scripts and, as in
    the peers, see the user's environment (credentials included). ``DSH_*`` is always removed."""


def _exec_form(hook: HookCommand) -> str:
    """The command line that runs ``hook`` (its exec form quoted so no shell interprets an argument)."""
    if hook.args is None:
        return hook.command
    if hook.shell == "powershell":
        words = ["'" + w.replace("'", "''") + "'" for w in (hook.command, *hook.args)]
        return "& " + " ".join(words)
    return "exec " + shlex.join((hook.command, *hook.args))


class HookRunner:
    """The ``hooks`` service: fires lifecycle events at the configured hooks of both dialects."""

    def __init__(
        self,
        ctx: Context,
        tables: Mapping[Dialect, HookTable],
        *,
        model: str = "dsh-scripted",
        permission_mode: str = "default",
        ask: Literal["deny", "allow"] = "deny",
        executor: Executor | None = None,
    ) -> None:
        self._ctx = ctx
        self.tables = dict(tables)
        self.model = model
        self.permission_mode = permission_mode
        self.ask = ask
        self.executor: Executor = executor or LocalExecutor(credential_pattern=None)
        self._done_once: set[tuple[str, Dialect, str, HookCommand]] = set()
        self._session_env: dict[str, dict[str, str]] = {}
        self._env_dir: Path | None = None
        self._background: set[asyncio.Task[HookReport]] = set()
        self._order = itertools.count(1)

    # -- configuration ------------------------------------------------------------------------

    @property
    def warnings(self) -> list[str]:
        """Everything skipped or ignored while loading the hook files, one line each."""
        return [w for table in self.tables.values() for w in table.warnings]

    def close(self) -> None:
        """Remove the ``CLAUDE_ENV_FILE`` folder; background hooks still running are cancelled."""
        for task in self._background:
            with contextlib.suppress(RuntimeError):  # its event loop may already be closed
                task.cancel()
        self._background.clear()
        if self._env_dir is not None:
            shutil.rmtree(self._env_dir, ignore_errors=True)
            self._env_dir = None

    def transcript_path(self, header: SessionHeader) -> str | None:
        """The transcript path from the current persistence's ``locate()``; never creates anything."""
        backend = self._ctx.get(SESSION_PERSISTENCE)
        location = None if backend is None else backend.locate(header)
        return None if location is None else location.path

    def session_env(self, header: SessionHeader) -> Mapping[str, str]:
        """What SessionStart hooks exported through their env file for this session (or its parent)."""
        env = self._session_env.get(header.id)
        if env is None and header.parent_session is not None:
            env = self._session_env.get(header.parent_session)
        return dict(env or {})

    # -- selection ----------------------------------------------------------------------------

    def matching(
        self,
        dialect: Dialect,
        event: str,
        subjects: Sequence[str] | str | None,
        *,
        session_id: str = "",
        tool: str | None = None,
        tool_input: Mapping[str, Any] | None = None,
    ) -> list[HookCommand]:
        """The commands of ``dialect`` that ``event`` runs for ``subjects`` (``if``, ``once``, duplicates applied)."""
        table = self.tables.get(dialect)
        if table is None:
            return []
        seen: set[tuple[Any, ...]] = set()
        chosen: list[HookCommand] = []
        for group in table.groups(event):
            if not group.matches(subjects):
                continue
            for hook in group.hooks:
                if hook.condition is not None and event in TOOL_EVENTS and tool is not None:
                    rule = parse_rule(hook.condition)
                    peer_input = peer_tool_input("claude", tool, tool_input or {})
                    if rule is None or not rule_matches(rule, tool_subjects("claude", tool), peer_input):
                        continue
                if hook.once and (session_id, dialect, event, hook) in self._done_once:
                    continue
                # Claude Code runs identical command hooks of one event once; Codex runs each.
                if dialect == "claude":
                    if hook.identity in seen:
                        continue
                    seen.add(hook.identity)
                chosen.append(hook)
        return chosen

    def facts(self, event: str, scope: HookScope, fields: Mapping[str, Any] | None = None) -> HookFacts:
        """The dialect-neutral facts of an event in ``scope``'s session."""
        header = scope.header
        return HookFacts(
            event=event,
            session_id=header.id,
            cwd=header.cwd,
            transcript_path=self.transcript_path(header),
            model=self.model,
            permission_mode=self.permission_mode,
            turn_id=scope.turn_id,
            fields=dict(fields or {}),
        )

    # -- lifecycle points the agent loop calls ------------------------------------------------

    async def session_start(self, header: SessionHeader, source: str) -> HookOutcome:
        """``SessionStart`` (``startup``, ``resume``, ``fork``) with an env file for each hook.

        Claude Code hooks get ``CLAUDE_ENV_FILE``; Codex hooks get ``CODEX_ENV_FILE`` and, as Codex
        does, the ``CLAUDE_ENV_FILE`` alias. Each hook writes its own file; they are sourced in order.
        """
        env_files: list[Path] = []

        def env_for(dialect: Dialect, index: int) -> dict[str, str]:
            path = self._env_file(header.id, f"{dialect}-{index}")
            env_files.append(path)
            names = ("CLAUDE_ENV_FILE",) if dialect == "claude" else ("CODEX_ENV_FILE", "CLAUDE_ENV_FILE")
            return {name: str(path) for name in names}

        outcome = await self._fire(
            {"claude": "SessionStart", "codex": "SessionStart"},
            HookScope(header),
            {"source": source},
            subject=lambda d: source,
            extra_env=env_for,
        )
        if env_files:
            warnings = await self._load_env_files(header, env_files)
            outcome = replace(outcome, warnings=outcome.warnings + tuple(warnings))
        return outcome

    async def user_prompt(self, scope: HookScope, prompt: str) -> HookOutcome:
        """``UserPromptSubmit`` (the main agent's turns only)."""
        return await self._fire(
            {"claude": "UserPromptSubmit", "codex": "UserPromptSubmit"},
            scope,
            {**scope.agent_fields(), "prompt": prompt},
        )

    async def pre_tool(self, scope: HookScope, tool: str, arguments: Mapping[str, Any], call_id: str) -> HookOutcome:
        """``PreToolUse``: may block, deny, ask, rewrite the input (``updated_input``) or stop."""
        fields = {**scope.agent_fields(), "tool_name": tool, "tool_input": dict(arguments), "tool_use_id": call_id}
        return await self._fire(
            {"claude": "PreToolUse", "codex": "PreToolUse"},
            scope,
            fields,
            subject=lambda d: tool_subjects(d, tool),
            tool=tool,
            tool_input=arguments,
        )

    async def post_tool(
        self,
        scope: HookScope,
        tool: str,
        arguments: Mapping[str, Any],
        call_id: str,
        response: Mapping[str, Any],
        error: str | None = None,
    ) -> HookOutcome:
        """``PostToolUse``, or for a failed call Claude Code's ``PostToolUseFailure`` (Codex has none)."""
        fields: dict[str, Any] = {
            **scope.agent_fields(),
            "tool_name": tool,
            "tool_input": dict(arguments),
            "tool_use_id": call_id,
            "tool_response": dict(response),
        }
        if error is not None:
            fields.update(error=error, is_interrupt=False)
        return await self._fire(
            {"claude": "PostToolUseFailure" if error is not None else "PostToolUse", "codex": "PostToolUse"},
            scope,
            fields,
            subject=lambda d: tool_subjects(d, tool),
            tool=tool,
            tool_input=arguments,
        )

    async def stop(self, scope: HookScope, *, stop_hook_active: bool, last_message: str | None) -> HookOutcome:
        """``Stop`` for the main agent; inside a subagent ``SubagentStop``, carrying the parent's identity."""
        fields = {"stop_hook_active": stop_hook_active, "last_assistant_message": last_message}
        if scope.parent is None:
            return await self._fire({"claude": "Stop", "codex": "Stop"}, scope, fields)
        location = self.transcript_path(scope.header)
        fields.update(agent_id=scope.agent_id, agent_type=scope.agent_type, agent_transcript_path=location)
        return await self._fire(
            {"claude": "SubagentStop", "codex": "SubagentStop"},
            scope.parent,
            fields,
            subject=lambda d: scope.agent_type or "",
        )

    async def subagent_start(self, scope: HookScope, agent_id: str, agent_type: str) -> HookOutcome:
        """``SubagentStart``, fired in the spawning agent's ``scope``."""
        return await self._fire(
            {"claude": "SubagentStart", "codex": "SubagentStart"},
            scope,
            {"agent_id": agent_id, "agent_type": agent_type},
            subject=lambda d: agent_type,
        )

    async def session_end(self, header: SessionHeader, reason: str = "other") -> HookOutcome:
        """``SessionEnd`` when a session's run ends; background hooks are waited for first.

        The session's exports, env files and ``once`` marks are dropped afterwards, so a long-lived
        runner (``dsh serve``) does not grow with the sessions it has seen; a resumed session starts
        afresh with its SessionStart hooks, as a new run of the peer does.
        """
        finished = await self.background(wait=True)
        outcome = await self._fire(
            {"claude": "SessionEnd", "codex": "SessionEnd"},
            HookScope(header),
            {"reason": reason},
            subject=lambda d: reason,
        )
        self._forget(header.id)
        return finished.merged(outcome)

    def _forget(self, session_id: str) -> None:
        self._session_env.pop(session_id, None)
        self._done_once = {key for key in self._done_once if key[0] != session_id}
        if self._env_dir is not None:
            shutil.rmtree(self._env_dir / session_id, ignore_errors=True)

    async def background(self, *, wait: bool = False) -> HookOutcome:
        """Reports of ``async`` hooks that finished (with ``wait``, of all of them)."""
        tasks = set(self._background)
        if wait and tasks:
            await asyncio.wait(tasks)
        done = [t for t in tasks if t.done() and not t.cancelled()]
        self._background.difference_update(done)
        return HookOutcome(tuple(t.result() for t in done), self.ask)

    # -- machinery ----------------------------------------------------------------------------

    async def _fire(
        self,
        events: Mapping[Dialect, str | None],
        scope: HookScope,
        fields: Mapping[str, Any],
        *,
        subject: Callable[[Dialect], Sequence[str] | str | None] = lambda d: None,
        tool: str | None = None,
        tool_input: Mapping[str, Any] | None = None,
        extra_env: Callable[[Dialect, int], dict[str, str]] | None = None,
    ) -> HookOutcome:
        jobs: list[Coroutine[Any, Any, HookReport]] = []
        for dialect in DIALECTS:
            event = events.get(dialect)
            if event is None:
                continue
            hooks = self.matching(
                dialect,
                event,
                subject(dialect),
                session_id=scope.header.id,
                tool=tool,
                tool_input=tool_input,
            )
            if not hooks:
                continue
            payload = json.dumps(build_payload(dialect, self.facts(event, scope, fields)))
            for index, hook in enumerate(hooks):
                if hook.once:
                    self._done_once.add((scope.header.id, dialect, event, hook))
                env = {"CLAUDE_PROJECT_DIR": scope.header.cwd} if dialect == "claude" else {}
                if extra_env is not None:
                    env.update(extra_env(dialect, index))
                job = self._run(dialect, event, hook, payload, scope.header.cwd, env, tool)
                if hook.run_async:
                    self._background.add(asyncio.ensure_future(job))
                else:
                    jobs.append(job)
        if not jobs:
            return HookOutcome(ask=self.ask)
        reports = tuple(await asyncio.gather(*jobs))
        for report in reports:
            if report.error is not None:
                log.warning("%s %s hook (%s) failed: %s", report.dialect, report.event, report.command, report.error)
        return HookOutcome(reports, self.ask)

    async def _run(
        self,
        dialect: Dialect,
        event: str,
        hook: HookCommand,
        payload: str,
        cwd: str,
        env: Mapping[str, str],
        tool: str | None,
    ) -> HookReport:
        request = BashExecRequest(
            command=_exec_form(hook),
            cwd=cwd if Path(cwd).is_dir() else None,
            timeout=hook.timeout,
            env=env,
            stdin=payload,
            shell="pwsh" if hook.shell == "powershell" else "bash",
        )
        try:
            result = await self.executor.run(request)
        except Exception as exc:  # a hook that cannot start is that hook's failure, never the agent's
            report = HookReport(dialect, event, hook.label, None, "", "", error=f"could not run: {exc}")
        else:
            if result.timed_out:
                report = HookReport(
                    dialect,
                    event,
                    hook.label,
                    result.exit_code,
                    result.stdout,
                    result.stderr,
                    timed_out=True,
                    error=f"timed out after {hook.timeout:g} s and was killed",
                )
            else:
                report = interpret(dialect, event, hook.label, result.exit_code, result.stdout, result.stderr, tool)
        return replace(report, background=hook.run_async, finished=next(self._order))

    def _env_file(self, session_id: str, index: str) -> Path:
        if self._env_dir is None:
            # Under the home's private run/ folder, never a shared temporary one: a folder a temp
            # cleaner removed could be recreated there by another user who plants exports.
            home = self._ctx.get(DSH_HOME)
            base = ensure_private_dir(home / "run", "dsh run folder") if home is not None else None
            self._env_dir = Path(tempfile.mkdtemp(prefix="hook-env-", dir=base))
        # Recreated 0700 if it went away, and refused if someone else made it in the meantime.
        ensure_private_dir(self._env_dir, "hook env folder")
        folder = ensure_private_dir(self._env_dir / session_id, "hook env folder")
        return folder / f"sessionstart-hook-{index}.sh"

    async def _load_env_files(self, header: SessionHeader, files: Sequence[Path]) -> list[str]:
        """Source the files SessionStart hooks wrote, in a shell, and keep what they exported."""
        present: list[Path] = []
        refused: list[str] = []
        for f in files:
            if not (f.is_file() and f.stat().st_size > 0):
                continue
            try:
                check_trusted(f.parent, "hook env folder")
                check_trusted(f, "hook env file")
            except UntrustedPathError as exc:
                refused.append(str(exc))
                continue
            present.append(f)
        if not present:
            return refused
        sources = "".join(f". {shlex.quote(str(f))} >/dev/null 2>&1; " for f in present)
        command = f"env -0; printf '\\0{_ENV_SPLIT}\\0'; set -a; {sources}env -0"
        request = BashExecRequest(command=command, cwd=header.cwd if Path(header.cwd).is_dir() else None, timeout=30)
        try:
            result = await self.executor.run(request)
        except Exception as exc:
            return [f"the SessionStart env files of session {header.id} could not be read: {exc}"]
        before_text, _, after_text = result.stdout.partition(f"\0{_ENV_SPLIT}\0")

        def parse(text: str) -> dict[str, str]:
            pairs = (item.partition("=") for item in text.split("\0") if "=" in item)
            return {k: v for k, _, v in pairs}

        before, after = parse(before_text), parse(after_text)
        warnings: list[str] = refused
        exports = self._session_env.setdefault(header.id, {})
        for key, value in after.items():
            if before.get(key) == value or key in _SHELL_STATE or key.startswith("BASH_"):
                continue
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                continue
            if is_managed_key(key):
                warnings.append(
                    f"SessionStart env file export {key} ignored: only dsh sets managed {DSH_ENV_PREFIX}* variables"
                )
                continue
            exports[key] = value
        return warnings


HOOKS: ServiceKey[HookRunner] = ServiceKey("hooks")
"""The hook runner service."""


def _apply(ctx: Context, config: HooksConfig) -> None:
    base = Path(config.base_dir).expanduser() if config.base_dir else None
    tables: dict[Dialect, HookTable] = {
        "claude": load_hook_table("claude", config.claude, base),
        "codex": load_hook_table("codex", config.codex, base),
    }
    for table in tables.values():
        for warning in table.warnings:
            log.warning("%s", warning)
    runner = HookRunner(
        ctx,
        tables,
        model=config.model,
        permission_mode=config.permission_mode,
        ask=config.ask,
        # Long hook output spills under the home, never into a shared temporary directory.
        executor=LocalExecutor(
            credential_pattern=config.credential_pattern,
            spill_dir=home / "output" if (home := ctx.get(DSH_HOME)) is not None else None,
        ),
    )
    ctx.effect(lambda: runner.close, label="hook runner")
    ctx.provide(HOOKS, runner)


plugin = Plugin(name="hooks", apply=_apply, Config=HooksConfig)
"""The ``hooks`` entry of the ``dsh.plugins`` group."""
