"""The ``hooks`` service the plugin provides: every loaded dialect's table, and the runner that fires
them, built once a table holds a hook.

Every ``dsh`` command loads the hooks plugin, and nearly every one finds no hook: no file under
``<DSH_HOME>/hooks/``, or files with nothing enabled. Then every point of the loop decides nothing,
and the machinery that runs a hook (payloads, processes, decisions, env files, transcript views:
:class:`~._service.HookRunner`, about a third of the hooks plugin's start-up) has nothing to do, so
:class:`Hooks` does not build it. The first point that finds a table holding a hook builds it on
the service's own :class:`~._table.HookTables`, so a dialect loaded or unloaded later (an install or
uninstall and a refresh) reaches the runner with the tables. A long-lived host learns of a hooks file
that appears from ``Hooks.tables.files()``, which names each installed dialect's file whether it is
there or not.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from dsh.agent import HookRecord, HookScope, HookVerdict, Notice
from dsh.session import EMPTY_MAPPING, SessionEvent, SessionHeader

from ._table import HookTables

if TYPE_CHECKING:
    from ._service import HookRunner


class Unheard(NamedTuple):
    """What a point decides while no table holds a hook: nothing (as an empty ``HookOutcome`` reads)."""

    reports: tuple[HookRecord, ...] = ()
    warnings: tuple[str, ...] = ()
    blocked: bool = False
    reason: str = ""
    stop: bool = False
    stop_reason: str = ""
    updated_input: Mapping[str, Any] | None = None
    context: tuple[str, ...] = ()

    def notices(self) -> tuple[Notice, ...]:
        """Nothing to tell the user."""
        return ()


UNHEARD = Unheard()
"""The verdict of every point while no table holds a hook."""


class Hooks:
    """The ``hooks`` service (it meets :class:`dsh.agent.LoopHooks`): the tables, and the runner once one holds a hook.

    ``build`` makes the runner on these tables (it runs what they hold then and later).
    """

    def __init__(self, build: Callable[[HookTables], "HookRunner"]) -> None:
        self._build = build
        self.tables = HookTables()
        """Each loaded dialect's table, its files and the configuration's warnings (the runner's too)."""
        self._runner: HookRunner | None = None

    @property
    def runner(self) -> "HookRunner | None":
        """The runner, once a point found a table holding a hook; None before."""
        return self._runner

    def _running(self) -> "HookRunner | None":
        """The runner, built the first time a table holds a hook; None while none does."""
        if self._runner is None and any(table.holds_hooks() for table in self.tables.values()):
            self._runner = self._build(self.tables)
        return self._runner

    def has_hooks(self, events: Iterable[str]) -> bool:
        """Whether a hook is configured for one of ``events`` (:meth:`~._table.HookTables.has_hooks`)."""
        return self.tables.has_hooks(events)

    def session_env(self, header: SessionHeader) -> Mapping[str, str]:
        """What SessionStart hooks exported for the session's calls (nothing before the runner exists)."""
        return EMPTY_MAPPING if self._runner is None else self._runner.session_env(header)

    def close(self) -> None:
        """Close the runner, if one was built."""
        if self._runner is not None:
            self._runner.close()

    # -- lifecycle points: the runner's, or nothing while no table holds a hook -----------------

    async def session_start(
        self,
        header: SessionHeader,
        source: str,
        *,
        events: Callable[[], Sequence[SessionEvent]] | None = None,
        ambient: Mapping[str, str] | None = None,
    ) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.session_start(header, source, events=events, ambient=ambient)

    async def session_end(
        self,
        header: SessionHeader,
        reason: str = "other",
        *,
        events: Callable[[], Sequence[SessionEvent]] | None = None,
        ambient: Mapping[str, str] | None = None,
    ) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.session_end(header, reason, events=events, ambient=ambient)

    async def user_prompt(self, scope: HookScope, prompt: str) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.user_prompt(scope, prompt)

    async def before_model(self, scope: HookScope) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.before_model(scope)

    async def after_model(
        self, scope: HookScope, text: str, tool_calls: Sequence[Mapping[str, Any]] = ()
    ) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.after_model(scope, text, tool_calls)

    async def pre_tool(self, scope: HookScope, tool: str, arguments: Mapping[str, Any], call_id: str) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.pre_tool(scope, tool, arguments, call_id)

    async def post_tool(
        self,
        scope: HookScope,
        tool: str,
        arguments: Mapping[str, Any],
        call_id: str,
        response: Mapping[str, Any],
        error: str | None = None,
    ) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.post_tool(scope, tool, arguments, call_id, response, error)

    async def post_tool_batch(
        self, scope: HookScope, calls: Sequence[tuple[str, Mapping[str, Any], str, Mapping[str, Any]]]
    ) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.post_tool_batch(scope, calls)

    async def stop(self, scope: HookScope, *, stop_hook_active: bool, last_message: str | None) -> HookVerdict:
        runner = self._running()
        if runner is None:
            return UNHEARD
        return await runner.stop(scope, stop_hook_active=stop_hook_active, last_message=last_message)

    async def stop_failure(
        self, scope: HookScope, error: BaseException, last_message: str | None = None
    ) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.stop_failure(scope, error, last_message)

    async def subagent_start(self, scope: HookScope, agent_id: str, agent_type: str) -> HookVerdict:
        runner = self._running()
        return UNHEARD if runner is None else await runner.subagent_start(scope, agent_id, agent_type)

    async def background(self) -> HookVerdict:
        # Only a runner can have started a hook in the background: never built, nothing finished.
        return UNHEARD if self._runner is None else await self._runner.background()
