"""The ``hooks`` service: which hooks an event runs, running them, and merging what they decided.

The agent loop talks to :class:`HookRunner` through one method per lifecycle point
(``session_start``, ``user_prompt``, ``pre_tool``, ``post_tool``, ``stop``, ``subagent_start``,
``session_end``); the runner fires the event at every dialect that has it (a failed call's event is
the dialect's :attr:`~._dialect.HookDialect.failed_tool_event`; ``Stop`` for the main agent,
``SubagentStop`` inside a subagent), picks the hooks that match, and merges what they decided into a
:class:`HookOutcome`. Everything a dialect does differently it answers itself (:mod:`._dialect`).

Importing this module loads no asyncio (nor logging): an event with no hook to run returns without
suspending, so a deployment that loads the plugin but configures no hook for the events of a
one-shot ``dsh exec`` keeps that command off asyncio (see :meth:`HookRunner.has_hooks`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dsh.bash import Executor, LocalExecutor
from dsh.core import Context
from dsh.paths.log import logger
from dsh.session import DSH_HOME, SessionHeader
from dsh.session.persistence import SESSION_PERSISTENCE

from ._decision import dialect_failed
from ._dialect import Dialect, TranscriptViews, dialect_of
from ._envfile import EnvFiles
from ._outcome import HookOutcome, HookReport
from ._payload import HookFacts, build_payload, peer_tool_input, tool_subjects
from ._process import hook_executor, run_hook
from ._scope import HookScope
from ._select import select_hooks
from ._table import HookCommand, HookTables

if TYPE_CHECKING:
    import asyncio

    from dsh.session import SessionEvent

    from ._detached import DetachedHook

TranscriptView = Literal["plugins", "all", "off"]
"""Which hooks of a dialect with its own transcript format get a view of the session in it as
``transcript_path``: those of plugin folders (the default), every one, or none (all get the
persistence's ``locate()``)."""


_ERROR_KINDS = (
    (("RateLimit", "TooManyRequests"), "rate_limit"),
    (("Authentication", "PermissionDenied", "Unauthorized"), "authentication_failed"),
    (("Billing", "Quota", "PaymentRequired"), "billing_error"),
    (("BadRequest", "InvalidRequest", "UnprocessableEntity", "NotFound"), "invalid_request"),
    (("Overloaded",), "overloaded"),
    (("InternalServer", "ServiceUnavailable", "APIConnection", "APITimeout"), "server_error"),
)


def error_kind(error: BaseException) -> str:
    """The ``StopFailure`` category of ``error``, told from its class and base class names (the
    provider SDKs name their errors so); ``unknown`` otherwise. A dialect may name it otherwise
    (:meth:`~._dialect.HookDialect.stop_error`)."""
    names = [cls.__name__ for cls in type(error).__mro__]
    for markers, kind in _ERROR_KINDS:
        if any(marker in name for name in names for marker in markers):
            return kind
    return "unknown"


async def _settled(report: HookReport) -> HookReport:
    """``report`` as one of the jobs an event awaits (a hook the dialect's failure kept from running)."""
    return report


def _conversation(scope: HookScope) -> list[dict[str, str]]:
    """The session's messages so far as ``role`` (``user``, ``assistant``) and text ``content``."""
    if scope.events is None:
        return []
    roles = {"message/user": "user", "message/context": "user", "message/assistant": "assistant"}
    found = []
    for event in scope.events():
        role = roles.get(event.type)
        text = event.data.get("text")
        if role is not None and isinstance(text, str) and text:
            found.append({"role": role, "content": text})
    return found


def _last_prompt(scope: HookScope) -> str | None:
    """The prompt the user gave the turn (the last ``message/user`` of their own), if the events say."""
    if scope.events is None:
        return None
    for event in reversed(scope.events()):
        if event.type == "message/user" and not event.data.get("source"):
            text = event.data.get("text")
            return text if isinstance(text, str) else None
    return None


class HookRunner:
    """The ``hooks`` service: fires lifecycle events at the configured hooks of every dialect."""

    def __init__(
        self,
        ctx: Context,
        tables: HookTables | None = None,
        *,
        model: str = "dsh-scripted",
        permission_mode: str = "default",
        ask: Literal["deny", "allow"] = "deny",
        executor: Executor | None = None,
        transcript_view: TranscriptView = "all",
    ) -> None:
        self._ctx = ctx
        self.tables = HookTables() if tables is None else tables
        """The tables whose hooks this runner runs: the ``hooks`` service's (:class:`~._hooks.Hooks`), or
        its own when built alone (``runner.tables.add(dialect, table)``)."""
        self.model = model
        self.permission_mode = permission_mode
        self.ask = ask
        self.executor: Executor = executor or hook_executor()
        self._done_once: set[tuple[str, Dialect, str, HookCommand]] = set()
        self._env_files = EnvFiles(ctx.get(DSH_HOME))
        self._background: set[asyncio.Task[HookReport]] = set()
        """``async`` hooks on an executor that cannot detach them: tasks of this process."""
        self._detached: list[DetachedHook] = []
        self._failed_async: list[HookReport] = []
        self._home = ctx.get(DSH_HOME)
        self._order = itertools.count(1)
        self.transcript_view: TranscriptView = transcript_view if self._home is not None else "off"
        self._views: dict[Dialect, TranscriptViews | None] = {}
        self.tables.on_remove(lambda dialect: self._views.pop(dialect, None))

    def has_hooks(self, events: Iterable[str]) -> bool:
        """Whether a hook is configured for one of ``events`` (:meth:`~._table.HookTables.has_hooks`)."""
        return self.tables.has_hooks(events)

    def close(self) -> None:
        """Remove the env files' folder; background tasks still running are cancelled (detached
        ``async`` hooks go on)."""
        for task in self._background:
            with contextlib.suppress(RuntimeError):  # its event loop may already be closed
                task.cancel()
        self._background.clear()
        self._env_files.close()

    def _transcript_path(self, header: SessionHeader) -> str | None:
        """The transcript path from the current persistence's ``locate()``; never creates anything."""
        backend = self._ctx.get(SESSION_PERSISTENCE)
        location = None if backend is None else backend.locate(header)
        return None if location is None else location.path

    def _wants_view(self, dialect: Dialect, hook: HookCommand) -> bool:
        """Whether ``hook`` is handed its dialect's transcript view (see :data:`TranscriptView`)."""
        return self.transcript_view != "off" and dialect_of(dialect).wants_view(hook, self.transcript_view)

    def _view_path(self, dialect: Dialect, scope: HookScope, warnings: list[str]) -> str | None:
        """The view of ``scope``'s session in ``dialect``'s transcript format, brought up to date.

        Without the session's events, or when the view cannot be written (one warning naming it), the
        hook gets the persistence's ``locate()`` instead, as every other hook does.
        """
        if dialect not in self._views and self._home is not None:
            self._views[dialect] = dialect_of(dialect).transcript_views(self._home, self.model)
        views = self._views.get(dialect)
        if scope.events is None or views is None:
            return self._transcript_path(scope.header)
        try:
            return views.update(scope.header, scope.events)
        except OSError as exc:
            path = views.path_for(scope.header)
            warnings.append(
                f"could not write the {dialect_of(dialect).peer} transcript view {path} ({exc}); its hooks got "
                "the session's own transcript path instead; make the folder writable"
            )
            return self._transcript_path(scope.header)

    def _events(self, event: str) -> dict[Dialect, str]:
        """``event`` for every dialect that fires it."""
        found = {d.name: d.peer_event(event) for d in self.tables.dialects()}
        return {name: peer for name, peer in found.items() if peer is not None}

    def _failed_events(self) -> dict[Dialect, str]:
        """The event each dialect fires after a failed call (:attr:`~._dialect.HookDialect.failed_tool_event`)."""
        found = {d.name: d.peer_event(d.failed_tool_event) for d in self.tables.dialects()}
        return {name: peer for name, peer in found.items() if peer is not None}

    def session_env(self, header: SessionHeader) -> Mapping[str, str]:
        """What SessionStart hooks exported through their env file for this session (or its parent)."""
        return self._env_files.exports(header.id, header.parent_session)

    # -- machinery ----------------------------------------------------------------------------

    def _facts(self, event: str, scope: HookScope, fields: Mapping[str, Any], transcript_path: str | None) -> HookFacts:
        """The dialect-neutral facts of an event in ``scope``'s session."""
        header = scope.header
        return HookFacts(
            event=event,
            session_id=header.id,
            cwd=header.cwd,
            transcript_path=transcript_path,
            model=self.model,
            permission_mode=self.permission_mode,
            turn_id=scope.turn_id,
            fields=dict(fields),
        )

    # -- lifecycle points the agent loop calls ------------------------------------------------

    async def session_start(
        self,
        header: SessionHeader,
        source: str,
        *,
        events: Callable[[], Sequence[SessionEvent]] | None = None,
        ambient: Mapping[str, str] | None = None,
    ) -> HookOutcome:
        """``SessionStart`` (``startup``, ``resume``, ``fork``) with an env file for each hook.

        ``events`` and ``ambient`` are :attr:`HookScope.events` and :attr:`HookScope.ambient`.

        Each hook gets its file under its dialect's names (:attr:`~._dialect.HookDialect.env_file_names`);
        each writes its own file, and they are sourced in order.
        """
        env_files: list[Path] = []

        def env_for(dialect: Dialect, index: int) -> dict[str, str]:
            path = self._env_files.new_file(header.id, f"{dialect}-{index}")
            env_files.append(path)
            return {name: str(path) for name in dialect_of(dialect).env_file_names}

        outcome = await self._fire(
            self._events("SessionStart"),
            HookScope(header, events=events, ambient=ambient),
            {"source": source},
            subject=lambda d: source,
            extra_env=env_for,
        )
        if env_files:
            warnings = await self._env_files.load(self.executor, header.id, header.cwd, env_files, ambient)
            outcome = outcome._replace(warnings=outcome.warnings + tuple(warnings))
        return outcome

    async def user_prompt(self, scope: HookScope, prompt: str) -> HookOutcome:
        """``UserPromptSubmit`` (the main agent's turns only)."""
        return await self._fire(
            self._events("UserPromptSubmit"),
            scope,
            {**scope.agent_fields(), "prompt": prompt},
        )

    async def pre_tool(self, scope: HookScope, tool: str, arguments: Mapping[str, Any], call_id: str) -> HookOutcome:
        """``PreToolUse``: may block, deny, ask, rewrite the input (``updated_input``) or stop.

        An ``ask`` nothing refused is put to ``PermissionRequest`` hooks, the peers' way to answer
        it: an ``allow`` runs the call (with its ``updatedInput``), a ``deny`` refuses it, and with no
        answer the ``ask`` policy of the config decides.
        """
        fields = {**scope.agent_fields(), "tool_name": tool, "tool_input": dict(arguments), "tool_use_id": call_id}
        outcome = await self._fire(
            self._events("PreToolUse"),
            scope,
            fields,
            subject=lambda d: tool_subjects(d, tool),
            tool=tool,
            tool_input=arguments,
        )
        if not outcome.asked:
            return outcome
        answer = await self._fire(
            self._events("PermissionRequest"),
            scope,
            {**scope.agent_fields(), "tool_name": tool, "tool_input": dict(arguments)},
            subject=lambda d: tool_subjects(d, tool),
            tool=tool,
            tool_input=arguments,
        )
        return outcome.merged(answer)

    async def post_tool(
        self,
        scope: HookScope,
        tool: str,
        arguments: Mapping[str, Any],
        call_id: str,
        response: Mapping[str, Any],
        error: str | None = None,
    ) -> HookOutcome:
        """``PostToolUse``, or for a failed call each dialect's :attr:`~._dialect.HookDialect.failed_tool_event`."""
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
            self._events("PostToolUse") if error is None else self._failed_events(),
            scope,
            fields,
            subject=lambda d: tool_subjects(d, tool),
            tool=tool,
            tool_input=arguments,
        )

    async def post_tool_batch(
        self, scope: HookScope, calls: Sequence[tuple[str, Mapping[str, Any], str, Mapping[str, Any]]]
    ) -> HookOutcome:
        """``PostToolBatch`` once every call of a model step has finished (in the dialects that have it).

        ``calls`` holds each call's tool, arguments, id and response; the payload's ``tool_calls``
        carries them as PostToolUse does (``tool_name``, ``tool_input``, ``tool_use_id``,
        ``tool_response``), in the step's order.
        """
        batch = [
            {"tool_name": tool, "tool_input": dict(arguments), "tool_use_id": call_id, "tool_response": dict(response)}
            for tool, arguments, call_id, response in calls
        ]  # in dsh's terms: each dialect's payload names them its own way
        return await self._fire(self._events("PostToolBatch"), scope, {**scope.agent_fields(), "tool_calls": batch})

    async def stop_failure(
        self, scope: HookScope, error: BaseException, last_message: str | None = None
    ) -> HookOutcome:
        """``StopFailure``: a turn ended by an error of the model or its provider.

        ``error`` is the peer's category, told from the exception's class names (``rate_limit``,
        ``overloaded``, ``authentication_failed``, ``billing_error``, ``invalid_request``,
        ``server_error``, else ``unknown``; each dialect's name for it is what its matchers see); the
        message is ``error_details``. What the hooks answer is only recorded: the turn has failed (an
        answer asking for a retry included: dsh does not retry a turn).
        """
        kind = error_kind(error)
        fields = {
            **scope.agent_fields(),
            "error": kind,
            "error_details": f"{type(error).__name__}: {error}",
            "last_assistant_message": last_message,
        }
        return await self._fire(
            self._events("StopFailure"),
            scope,
            fields,
            subject=lambda d: dialect_of(d).stop_error(kind),
        )

    async def before_model(self, scope: HookScope) -> HookOutcome:
        """``BeforeModel`` (in the dialects that have it): the conversation the model is about to be asked.

        Fields in dsh's terms: ``model`` and ``messages`` (``role`` ``user`` or ``assistant``, the
        text ``content``), from the session's events; each dialect shapes them as its peer does.
        A block or ``continue: false`` ends the turn before the model is asked.
        """
        fields = {"model_name": self.model, "messages": _conversation(scope)}
        return await self._fire(self._events("BeforeModel"), scope, {**scope.agent_fields(), **fields})

    async def after_model(
        self, scope: HookScope, text: str, tool_calls: Sequence[Mapping[str, Any]] = ()
    ) -> HookOutcome:
        """``AfterModel``: the model's answer (its ``text`` and the ``tool_calls`` it asked for) before
        the loop acts on it; a block or ``continue: false`` ends the turn and the answer is dropped."""
        fields = {
            "model_name": self.model,
            "messages": _conversation(scope),
            "response_text": text,
            "response_tool_calls": [dict(c) for c in tool_calls],
        }
        return await self._fire(self._events("AfterModel"), scope, {**scope.agent_fields(), **fields})

    async def stop(self, scope: HookScope, *, stop_hook_active: bool, last_message: str | None) -> HookOutcome:
        """``Stop`` for the main agent; inside a subagent ``SubagentStop``, carrying the parent's identity."""
        fields = {
            "stop_hook_active": stop_hook_active,
            "last_assistant_message": last_message,
            "prompt": _last_prompt(scope),
        }
        if scope.parent is None:
            return await self._fire(self._events("Stop"), scope, fields)
        location = self._transcript_path(scope.header)
        fields.update(agent_id=scope.agent_id, agent_type=scope.agent_type, agent_transcript_path=location)
        return await self._fire(
            self._events("SubagentStop"),
            scope.parent,
            fields,
            subject=lambda d: scope.agent_type or "",
            subagent=scope,
        )

    async def subagent_start(self, scope: HookScope, agent_id: str, agent_type: str) -> HookOutcome:
        """``SubagentStart``, fired in the spawning agent's ``scope``."""
        return await self._fire(
            self._events("SubagentStart"),
            scope,
            {"agent_id": agent_id, "agent_type": agent_type},
            subject=lambda d: agent_type,
        )

    async def session_end(
        self,
        header: SessionHeader,
        reason: str = "other",
        *,
        events: Callable[[], Sequence[SessionEvent]] | None = None,
        ambient: Mapping[str, str] | None = None,
    ) -> HookOutcome:
        """``SessionEnd`` when a session's run ends, with the reports of ``async`` hooks that finished
        (those still running are not waited for: they go on detached, see :mod:`._detached`).
        ``events`` and ``ambient`` are :attr:`HookScope.events` and :attr:`HookScope.ambient`.

        The session's exports, env files and ``once`` marks are dropped afterwards, so a long-lived
        runner (``dsh serve``) does not grow with the sessions it has seen; a resumed session starts
        afresh with its SessionStart hooks, as a new run of the peer does.
        """
        finished = await self.background()
        outcome = await self._fire(
            self._events("SessionEnd"),
            HookScope(header, events=events, ambient=ambient),
            {"reason": reason},
            subject=lambda d: reason,
        )
        self._forget(header.id)
        return finished.merged(outcome)

    def _forget(self, session_id: str) -> None:
        self._done_once = {key for key in self._done_once if key[0] != session_id}
        self._env_files.forget(session_id)
        for views in self._views.values():
            if views is not None:
                views.forget(session_id)

    async def background(self) -> HookOutcome:
        """Reports of the ``async`` hooks that finished since the last call; never waits for one."""
        tasks = set(self._background)
        done = [t for t in tasks if t.done() and not t.cancelled()]
        self._background.difference_update(done)
        reports = [t.result() for t in done]
        ended = [d for d in self._detached if d.finished()]
        for detached in ended:
            self._detached.remove(detached)
            reports.append(detached.report()._replace(background=True, finished=next(self._order)))
            detached.discard()
        reports.extend(self._failed_async)
        self._failed_async.clear()
        return HookOutcome(tuple(reports), self.ask)

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
        subagent: HookScope | None = None,
    ) -> HookOutcome:
        """Run the hooks of ``events`` (each dialect's name for it) in ``scope`` and merge what they decided.

        ``subagent`` is the scope of the subagent a ``SubagentStop`` is about (its transcript is
        ``agent_transcript_path``).
        """
        jobs: list[Coroutine[Any, Any, HookReport]] = []
        warnings: list[str] = []
        for dialect in (d.name for d in self.tables.dialects()):
            event = events.get(dialect)
            if event is None:
                continue
            table = self.tables.get(dialect)
            if table is None:
                continue
            try:
                hooks = select_hooks(
                    table,
                    event,
                    subject(dialect),
                    tool=tool,
                    tool_input=tool_input,
                    done=lambda hook: (scope.header.id, dialect, event, hook) in self._done_once,  # noqa: B023 (used at once)
                )
                peer_input = None if tool is None or not hooks else peer_tool_input(dialect, tool, tool_input or {})
            except Exception as exc:  # the dialect's matcher or tool names failed: none of its hooks can be chosen
                jobs.append(_settled(dialect_failed(dialect, event, f"{dialect} {event} hooks", exc)))
                continue
            if not hooks:
                continue
            payloads: dict[bool, str] = {}  # one per kind of transcript_path: the view, or locate()
            for index, hook in enumerate(hooks):
                try:
                    view = self._wants_view(dialect, hook)
                    if view not in payloads:
                        payloads[view] = self._payload(dialect, event, scope, fields, view, subagent, warnings)
                    payload = payloads[view]
                    env = dialect_of(dialect).hook_env(hook, scope.header)
                except Exception as exc:  # the dialect's code failed: the hook cannot run as its peer runs it
                    jobs.append(_settled(dialect_failed(dialect, event, hook.label, exc)))
                    continue
                if hook.once:
                    self._done_once.add((scope.header.id, dialect, event, hook))
                if extra_env is not None:
                    env.update(extra_env(dialect, index))
                cwd = scope.header.cwd
                if hook.run_async:
                    self._detach(dialect, event, hook, payload, cwd, env, tool, peer_input, scope.ambient)
                else:
                    jobs.append(self._run(dialect, event, hook, payload, cwd, env, tool, peer_input, scope.ambient))
        if not jobs:
            return HookOutcome(ask=self.ask, warnings=tuple(warnings))
        import asyncio

        reports = tuple(await asyncio.gather(*jobs))
        for report in reports:
            if report.error is not None:
                logger("dsh.hooks").warning(
                    "%s %s hook (%s) failed: %s", report.dialect, report.event, report.command, report.error
                )
        return HookOutcome(reports, self.ask, warnings=tuple(warnings))

    def _payload(
        self,
        dialect: Dialect,
        event: str,
        scope: HookScope,
        fields: Mapping[str, Any],
        view: bool,
        subagent: HookScope | None,
        warnings: list[str],
    ) -> str:
        """The JSON payload of ``event`` for ``dialect``; ``view``: with the dialect's transcript view."""
        given = dict(fields)
        if view and subagent is not None:
            given["agent_transcript_path"] = self._view_path(dialect, subagent, warnings)
        path = self._view_path(dialect, scope, warnings) if view else self._transcript_path(scope.header)
        return json.dumps(build_payload(dialect, self._facts(event, scope, given, path)))

    def _detach(
        self,
        dialect: Dialect,
        event: str,
        hook: HookCommand,
        payload: str,
        cwd: str,
        env: Mapping[str, str],
        tool: str | None,
        tool_input: Mapping[str, Any] | None,
        ambient: Mapping[str, str] | None,
    ) -> None:
        """Start an ``async`` hook detached (see :mod:`._detached`); one that cannot start is reported."""
        from ._detached import start_detached
        from ._process import hook_request

        request = hook_request(hook, payload, cwd, env, tool_input, ambient)
        if not isinstance(self.executor, LocalExecutor):  # only a local executor can leave a child behind
            import asyncio

            job = self._run(dialect, event, hook, payload, cwd, env, tool, tool_input, ambient)
            self._background.add(asyncio.ensure_future(job))
            return
        try:
            line = request.command
            self._detached.append(start_detached(self.executor, self._home, dialect, event, hook, line, request, tool))
        except Exception as exc:
            error = f"could not run: {exc}"
            self._failed_async.append(
                HookReport(dialect, event, hook.label, None, "", "", error=error, background=True)
            )

    async def _run(
        self,
        dialect: Dialect,
        event: str,
        hook: HookCommand,
        payload: str,
        cwd: str,
        env: Mapping[str, str],
        tool: str | None,
        tool_input: Mapping[str, Any] | None,
        ambient: Mapping[str, str] | None,
    ) -> HookReport:
        report = await run_hook(self.executor, dialect, event, hook, payload, cwd, env, tool, tool_input, ambient)
        return report._replace(background=hook.run_async, finished=next(self._order))
