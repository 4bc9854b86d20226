"""The front door for Python integrators: compose a deployment, boot it, hand out sessions and turns.

:class:`Harness` owns the booted runtime and one event loop on a thread of its own: every hook, tool
call and record of its sessions runs there, so its sync methods may be called from any thread
(calls overlap) and its ``a``-prefixed ones from any asyncio loop.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from contextlib import ExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from dsh.agent import Agent, Model, ScriptedModel, SpawnTool
from dsh.bash_env import outer_claim
from dsh.core import DshError
from dsh.loader import Deployment, Runtime, parse_deployment
from dsh.paths.deployment import choose_deployment
from dsh.session import (
    SESSIONS,
    TOOLS,
    Session,
    SessionEvent,
    SessionHeader,
    SessionLocation,
    ToolResult,
    ToolSpec,
    anthropic_tool,
    openai_tool,
)

from ._live import Stamp, Watched, stamp, watched
from ._runtime import DEFAULT_SOURCE, boot_layered, layered, open_runtime

# asyncio (with ssl, inspect, concurrent.futures and logging behind it) is imported where a harness
# runs its loop, not here: the `dsh` command imports this package for open_runtime on every cold
# `dsh exec`, which never opens a Harness (tests/integration/test_cold_imports.py).
if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import Future

    from dsh.agent import TurnResult
    from dsh.agent.outside import Turn
    from dsh.hooks import Notice

T = TypeVar("T")

SPAWN_AGENT = SpawnTool.spec.name
"""The one tool an outside loop cannot serve alone: its subagent runs on a model, the session's own."""


def notice_line(notice: Notice) -> str:
    """How dsh prints a hook notice: ``dsh: hook: ...`` for a message, ``dsh: warning: ...``.

    Public so every host of a harness (the ``dsh`` command, ``dsh mcp``, an integrator's program)
    prints notices alike.
    """
    return f"dsh: {'hook' if notice.kind == 'message' else 'warning'}: {notice.text}"


DeploymentSource = str | os.PathLike[str] | Mapping[str, Any] | Deployment | None
"""What :class:`Harness` takes: a file, the structure of one, typed objects, or None (the one in effect)."""


class Harness:
    """dsh for a Python program: ``with Harness(deployment=...) as harness: session = harness.session()``.

    ``deployment`` is layered on the default deployment exactly as a deployment file is: omitted
    ``plugins`` means the default set, an entry with a default's id replaces it, other entries are
    added, ``{"id": "hooks", "enabled": False}`` removes a default, omitted ``persistence`` is JSONL.
    It may be a path to a YAML file, a mapping of the same structure, a :class:`dsh.loader.Deployment`
    (with :class:`~dsh.loader.PluginEntry` and :class:`~dsh.loader.PersistenceChoice`), or None for
    the deployment the ``dsh`` command would use (``$DSH_DEPLOYMENT``, ``<DSH_HOME>/deployment.yaml``,
    else the default). ``env`` stands in for ``os.environ`` when resolving the home (``DSH_HOME``).
    ``notify`` receives hooks' ``systemMessage`` lines and hook failure warnings (default: the log).
    """

    def __init__(
        self,
        deployment: DeploymentSource = None,
        *,
        env: Mapping[str, str] | None = None,
        notify: Callable[[Notice], None] | None = None,
    ) -> None:
        self._source = deployment
        self._env = env
        self.notify = notify
        self._runtime: Runtime | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sessions: list[HarnessSession] = []
        self._lock = threading.Lock()
        self._file: str | None = None
        self._watched: Watched = ()
        self._stamp: Stamp = ()

    # -- life -------------------------------------------------------------------------------------

    def __enter__(self) -> Harness:
        self.open()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Harness:
        import asyncio

        await asyncio.to_thread(self.open)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        import asyncio

        await asyncio.to_thread(self.close)

    def open(self) -> None:
        """Boot the deployment (raises :class:`dsh.loader.BootError` naming each entry that failed)."""
        if self._runtime is not None:
            return
        self._runtime = self._boot()
        self._watched = watched(self._runtime, self._file)
        self._stamp = stamp(self._watched)
        import asyncio

        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="dsh-harness", daemon=True)
        self._loop = loop
        self._thread.start()

    def changed(self) -> bool:
        """Whether the deployment file, a hook file or the trust of either moved since :meth:`open`.

        The runtime enforces those files as they were when it booted, where a cold ``dsh exec``
        reads them as they are: a long-lived host asks before each call (``dsh mcp`` then refuses
        the call, ``dsh serve`` boots again).
        """
        return self._runtime is not None and stamp(self._watched) != self._stamp

    def _boot(self) -> Runtime:
        source = self._source
        if source is None or isinstance(source, str | os.PathLike):
            choice = choose_deployment(None if source is None else os.fspath(source), self._env)
            self._file = choice.path
            return open_runtime(choice=choice, env=self._env)
        if isinstance(source, Deployment):
            deployment, name = source, "<Deployment>"
        elif isinstance(source, Mapping):
            deployment, name = parse_deployment(dict(source), "<deployment mapping>"), "<deployment mapping>"
        else:
            raise TypeError(
                "Harness(deployment=...) takes a path, a mapping or a dsh.loader.Deployment, "
                f"not {type(source).__name__}"
            )
        return boot_layered(layered(deployment, name, self._env), name, env=self._env)

    def close(self) -> None:
        """End every open session (``SessionEnd`` hooks), unload the deployment, stop the loop. Idempotent."""
        if self._runtime is None:
            return
        try:
            for session in list(self._sessions):
                session.close()
        finally:
            runtime, self._runtime = self._runtime, None
            try:
                runtime.close()
            finally:
                loop, self._loop = self._loop, None
                if loop is not None:
                    loop.call_soon_threadsafe(loop.stop)
                    if self._thread is not None:
                        self._thread.join()
                    loop.close()

    @property
    def runtime(self) -> Runtime:
        """The booted deployment (its context, fibers and services), for what the front door does not cover."""
        if self._runtime is None:
            raise DshError("the harness is not open; use it as 'with Harness(...) as harness:'")
        return self._runtime

    @property
    def source(self) -> str:
        """What the booted deployment came from: a file's path, or a name in angle brackets."""
        return self.runtime.source if self._runtime is not None else DEFAULT_SOURCE

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the harness's loop and wait for its result (from any thread but that loop's)."""
        future = self.submit(coroutine)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # KeyboardInterrupt while waiting: the work on the loop is cancelled too
            raise

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coroutine`` on the harness's loop; the returned future may be cancelled."""
        loop = self._loop
        if loop is None or self._runtime is None:
            coroutine.close()
            raise DshError("the harness is not open; use it as 'with Harness(...) as harness:'")
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise DshError("a harness method was called from a hook or tool running on the harness itself")
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, loop)

    async def arun(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await ``coroutine`` run on the harness's loop, from another asyncio loop."""
        import asyncio

        return await asyncio.wrap_future(self.submit(coroutine))

    # -- tools ------------------------------------------------------------------------------------

    def tools(self, names: Iterable[str] | None = None) -> list[ToolSpec]:
        """The tools to offer your model: exactly ``names``, in that order, or by default every tool of
        the deployment an outside loop can serve, sorted by name.

        ``spawn_agent`` is never in the default and never offered here: its subagent runs on a model,
        so only a session opened with one (``harness.session(model=...)``) offers it
        (:meth:`HarnessSession.tools`). An unknown or repeated name raises :class:`DshError`.
        """
        return _select(
            self.runtime,
            names,
            refusal="spawn_agent runs its subagents on your model, which the harness does not have; ask a session "
            "opened with harness.session(model=your_model) for it (session.tools([...]))",
        )

    def openai_tools(self, names: Iterable[str] | None = None, *, strict: bool = False) -> list[dict[str, Any]]:
        """:meth:`tools` as OpenAI function tools (see :func:`dsh.session.openai_tool`)."""
        return [openai_tool(spec, strict=strict) for spec in self.tools(names)]

    def anthropic_tools(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """:meth:`tools` as Anthropic Messages API tools (``input_schema``)."""
        return [anthropic_tool(spec) for spec in self.tools(names)]

    # -- sessions ---------------------------------------------------------------------------------

    def session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        model: Model | None = None,
    ) -> HarnessSession:
        """A new session (in ``cwd``, default the current directory), or the stored one ``session_id`` resumed.

        ``model`` (your :class:`dsh.agent.Model`) is what the session's ``spawn_agent`` runs its
        subagents on (``model.subagent(agent_type)``); without one the session does not offer
        ``spawn_agent``.

        The session holds its write lock until :meth:`HarnessSession.close` (another writer is refused
        with :class:`dsh.session.SessionLockedError`); ``SessionStart`` hooks fire now
        (``startup`` or ``resume``).
        """
        store = self.runtime.ctx.require(SESSIONS)
        if session_id is not None and cwd is not None:
            raise DshError("a resumed session keeps its own working directory; pass cwd only for a new session")
        if session_id is not None:
            session = store.resume(session_id, lock=True)
        else:
            claim = outer_claim(os.environ)  # an embedder inside a dsh shell records that call as its parent
            session = store.create(None if cwd is None else os.fspath(cwd), lock=True, **claim)
        handle = HarnessSession(self, session, model)
        try:
            handle._start("resume" if session_id is not None else "startup")
        except BaseException:
            handle._stack.close()
            raise
        with self._lock:
            self._sessions.append(handle)
        return handle

    def _forget(self, session: HarnessSession) -> None:
        with self._lock:
            if session in self._sessions:
                self._sessions.remove(session)


class HarnessSession:
    """One dsh session of a :class:`Harness`: its identity, its transcript, and its turns."""

    def __init__(self, harness: Harness, session: Session, model: Model | None = None) -> None:
        self.harness = harness
        self.session = session
        """The live :class:`dsh.session.Session` (header, history, pending events)."""
        self.model = model
        """The caller's model ``spawn_agent`` runs subagents on, or None (then ``spawn_agent`` is not offered)."""
        self.agent = Agent(harness.runtime.ctx, session, model or ScriptedModel([]), notify=harness.notify)
        """The agent outside turns run as (``main``); its model is asked only for a subagent's."""
        self._stack = ExitStack()
        self._stack.enter_context(session.holding())  # the lock create/resume took, kept for the session's life
        self._closed = False

    def __repr__(self) -> str:
        return f"<HarnessSession {self.id}>"

    def __enter__(self) -> HarnessSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _start(self, source: str) -> None:
        stopped = self.harness.run(self.agent.start(source))
        if stopped is not None:
            raise DshError(f"session {self.id}: a SessionStart hook stopped it: {stopped}")

    @property
    def id(self) -> str:
        """The session id (``DSH_SESSION_ID`` of its calls)."""
        return self.session.id

    @property
    def header(self) -> SessionHeader:
        """The stored header: id, cwd, parent, origin, depth."""
        return self.session.header

    @property
    def location(self) -> SessionLocation | None:
        """Where the backend keeps the transcript (JSONL: a file, maybe not written yet), or None."""
        return self.session.locate()

    @property
    def events(self) -> list[SessionEvent]:
        """Every event of the session so far (stored, then not yet flushed); see dsh-session's event table."""
        return list(self.session.history)

    def tools(self, names: Iterable[str] | None = None) -> list[ToolSpec]:
        """:meth:`Harness.tools` for this session: ``spawn_agent`` too (in the default, or by name)
        when the session has a model."""
        refusal = None if self.model is not None else _NO_MODEL.format(where=self)
        return _select(self.harness.runtime, names, refusal=refusal)

    def openai_tools(self, names: Iterable[str] | None = None, *, strict: bool = False) -> list[dict[str, Any]]:
        """:meth:`tools` as OpenAI function tools."""
        return [openai_tool(spec, strict=strict) for spec in self.tools(names)]

    def anthropic_tools(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """:meth:`tools` as Anthropic Messages API tools."""
        return [anthropic_tool(spec) for spec in self.tools(names)]

    def turn(self, prompt: str | None = None) -> HarnessTurn:
        """A turn for your own loop: ``with session.turn(prompt) as turn: turn.call("bash", {...})``.

        ``prompt`` (the user's message) is recorded and given to ``UserPromptSubmit`` hooks; None
        opens a turn of tool calls alone. Also ``async with``.
        """
        self._check_open()
        from dsh.agent.outside import Turn  # it imports asyncio (see the top)

        return HarnessTurn(self, Turn(self.agent, prompt))

    def run_turn(self, prompt: str, model: Model) -> TurnResult:
        """One turn of dsh's own loop, driven by ``model`` (your :class:`dsh.agent.Model`)."""
        self._check_open()
        return self.harness.run(self._agent_for(model).run_turn(prompt))

    async def arun_turn(self, prompt: str, model: Model) -> TurnResult:
        """:meth:`run_turn` from an asyncio loop."""
        self._check_open()
        return await self.harness.arun(self._agent_for(model).run_turn(prompt))

    def _agent_for(self, model: Model) -> Agent:
        return Agent(self.harness.runtime.ctx, self.session, model, notify=self.harness.notify)

    def _check_open(self) -> None:
        if self._closed:
            raise DshError(f"session {self.id} is closed; resume it with harness.session({self.id!r})")

    def close(self) -> None:
        """Fire ``SessionEnd`` hooks and release the session's write lock. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.harness.run(self.agent.end())
        finally:
            self._stack.close()
            self.harness._forget(self)


class HarnessTurn:
    """A :class:`dsh.agent.outside.Turn` run on the harness's loop: sync and thread-safe, or awaited (``a``-methods)."""

    def __init__(self, session: HarnessSession, turn: Turn) -> None:
        self._session = session
        self._harness = session.harness
        self.turn = turn

    @property
    def id(self) -> str | None:
        """The turn's id (``DSH_TURN_ID`` of its calls), once entered."""
        return self.turn.id

    @property
    def blocked(self) -> str | None:
        """Why a ``UserPromptSubmit`` hook blocked the prompt, else None."""
        return self.turn.blocked

    @property
    def stopped(self) -> str | None:
        """Why a hook stopped the turn (``continue: false``), else None."""
        return self.turn.stopped

    def __enter__(self) -> HarnessTurn:
        self._harness.run(self.turn.__aenter__())
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._harness.run(self.turn.__aexit__(kind, exc, tb))

    async def __aenter__(self) -> HarnessTurn:
        await self._harness.arun(self.turn.__aenter__())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._harness.arun(self.turn.__aexit__(kind, exc, tb))

    def call(self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None) -> ToolResult:
        """Run one tool call (see :meth:`dsh.agent.outside.Turn.call`); safe to call from several threads at once.

        ``spawn_agent`` in a session without a model raises :class:`DshError` (nothing is recorded):
        the session never offered it.
        """
        self._check_servable(name)
        return self._harness.run(self.turn.call(name, arguments, call_id=call_id))

    async def acall(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> ToolResult:
        """:meth:`call` awaited; several at once with ``asyncio.gather`` overlap."""
        self._check_servable(name)
        return await self._harness.arun(self.turn.call(name, arguments, call_id=call_id))

    def _check_servable(self, name: str) -> None:
        if name == SPAWN_AGENT and self._session.model is None:
            raise DshError(_NO_MODEL.format(where=self._session))

    def finish(self, text: str | None = None) -> str | None:
        """Fire ``Stop`` with the model's last ``text``; a Stop hook's blocking reason, else None."""
        return self._harness.run(self.turn.finish(text))

    async def afinish(self, text: str | None = None) -> str | None:
        """:meth:`finish` awaited."""
        return await self._harness.arun(self.turn.finish(text))


_NO_MODEL = (
    "session {where.id} has no model for spawn_agent's subagents; open the session with "
    "harness.session(model=your_model) to offer and serve it, or leave spawn_agent out of the tools"
)


def _select(runtime: Runtime, names: Iterable[str] | None, *, refusal: str | None) -> list[ToolSpec]:
    """The tools ``names`` asks for, in its order, else the default set; ``refusal`` is why spawn_agent
    is not offered (None: a model serves it)."""
    specs = {spec.name: spec for spec in runtime.ctx.require(TOOLS).specs()}
    if names is None:
        return [spec for name, spec in sorted(specs.items()) if refusal is None or name != SPAWN_AGENT]
    if isinstance(names, str):
        raise TypeError(f"tools(names) takes a list of tool names, not the string {names!r}")
    chosen: list[ToolSpec] = []
    offered = sorted(name for name in specs if refusal is None or name != SPAWN_AGENT)
    for name in names:
        if name not in specs:
            raise DshError(f"no tool named {name!r} in this deployment; its tools: {', '.join(offered)}")
        if name == SPAWN_AGENT and refusal is not None:
            raise DshError(refusal)
        if any(spec.name == name for spec in chosen):
            raise DshError(f"the tool {name!r} is asked for twice")
        chosen.append(specs[name])
    return chosen
