"""The stdio MCP server: dsh's shell tools for one client connection, as one dsh session.

The SDK's low-level :class:`mcp.server.Server` serves the connection on the main thread's asyncio
loop; every hook, tool call and record runs on the :class:`dsh.harness.Harness` loop (its own thread),
reached through ``Harness.arun``. Calls that overlap share one turn (:class:`_Turns`), so the
transcript stays a sequence of whole turns however the client interleaves them.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import stat
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import anyio

import mcp.types as types
from dsh.agent import TranscriptNotSaved, TurnError
from dsh.agent.outside import Turn
from dsh.core import DshError
from dsh.harness import Harness, HarnessSession, notice_line
from dsh.paths import seal_process
from dsh.paths.signals import on_loop
from dsh.session import TOOLS, ToolResult, ToolSpec, anthropic_tool, is_safe_id
from dsh.session.trace import TraceContext, incoming
from dsh.tool_bash import ShellTool
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from anyio.abc import ObjectReceiveStream, ObjectSendStream

    from dsh.hooks import Notice

SERVER_NAME = "dsh"
TURN_SOURCE = "mcp"
"""The ``source`` of the ``turn/start`` events this server records."""

ENDING_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
"""Signals that end the server the way a vanished client does: running calls are killed and recorded."""


def shell_tools(specs: list[ToolSpec], tools: Mapping[str, object]) -> list[ToolSpec]:
    """The shell tools among ``specs`` and their background companions (``<name>_output``, ``<name>_stop``).

    A shell tool is one dsh-tool-bash's :class:`~dsh.tool_bash.ShellTool` provides (``bash``, and
    ``pwsh`` when dsh-tool-pwsh is deployed); other tools of the registry (``skill``,
    ``spawn_agent``, a plugin's own) are not offered: an MCP client brings its own model and tools.
    """
    shells = {name for name, tool in tools.items() if isinstance(tool, ShellTool)}
    offered = shells | {f"{name}_{suffix}" for name in shells for suffix in ("output", "stop")}
    return [spec for spec in specs if spec.name in offered]


def mcp_tool(spec: ToolSpec) -> types.Tool:
    """``spec`` as an MCP tool; the JSON Schema is dsh-session's export (the Anthropic form is the same)."""
    exported = anthropic_tool(spec)
    return types.Tool(name=exported["name"], description=exported["description"], input_schema=exported["input_schema"])


def call_id(request_id: object) -> str:
    """A call id for one ``tools/call`` (MCP has none): safe by the session-id rule, unique across connections.

    It carries the JSON-RPC request id when that is safe in an id (``mcp-7-1f2e...``), so a call in
    the transcript can be matched to the client's log; a random part keeps ids of a resumed session unique.
    """
    tail = os.urandom(6).hex()
    made = f"mcp-{request_id}-{tail}" if isinstance(request_id, int | str) else f"mcp-{tail}"
    return made if is_safe_id(made) else f"mcp-{tail}"


def request_trace(params: types.CallToolRequestParams) -> TraceContext | None:
    """The trace context an MCP client sent with a call (``traceparent``, ``tracestate``, ``baggage``
    in the request's ``_meta``), continued by the call's span; None when it sent no valid one."""
    meta = params.meta
    if meta is None:
        return None
    # ``_meta`` is an open map (a TypedDict with extra items): the W3C keys arrive as sent.
    # MCP spells them in lower case (``traceparent``), the environment carriers in upper case.
    context = incoming({k.upper(): v for k, v in meta.items() if isinstance(k, str) and isinstance(v, str)})
    return None if context is None or context.span_id is None else context


def result(outcome: ToolResult) -> types.CallToolResult:
    """A dsh tool result as the MCP client sees it: the text the model would read, and whether it failed."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.output)], is_error=outcome.is_error
    )


def error_result(text: str) -> types.CallToolResult:
    """A call that could not run (or not be recorded), said in one line the client's model reads."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class _Turns:
    """The open turn of a session, shared by the calls that overlap; recorded when the last of them ends.

    Every method runs on the harness's loop. A call arriving while a turn is open joins it; the
    turn is entered on the first call and left when the number running drops to zero: with its
    ``Stop`` hooks and ``turn/end``, or, when one of its calls was cancelled (the client went away),
    recorded as interrupted (``cancelled``). A lock keeps a new turn from opening while the last
    one is being recorded.
    """

    def __init__(self, session: HarnessSession) -> None:
        self._session = session
        self._turn: Turn | None = None
        self._running = 0
        self._failure: BaseException | None = None
        self._lock: asyncio.Lock | None = None
        self._idle: asyncio.Event | None = None

    def _guards(self) -> tuple[asyncio.Lock, asyncio.Event]:
        if self._lock is None or self._idle is None:
            self._lock, self._idle = asyncio.Lock(), asyncio.Event()
            self._idle.set()
        return self._lock, self._idle

    async def call(
        self, name: str, arguments: Mapping[str, Any], call_id: str, trace: TraceContext | None = None
    ) -> ToolResult:
        """Run one call in the open turn (opening one when none is); ``trace``: the request's context."""
        lock, idle = self._guards()
        async with lock:
            if self._turn is None:
                turn = Turn(self._session.agent, None, source=TURN_SOURCE)
                await turn.__aenter__()
                self._turn = turn
            turn = self._turn
            self._running += 1
            idle.clear()
        try:
            return await turn.call(name, arguments, call_id=call_id, trace=trace)
        except BaseException as exc:
            self._failure = self._failure or exc
            raise
        finally:
            self._running -= 1
            if self._running == 0:
                await self._close(turn)

    async def _close(self, turn: Turn) -> None:
        lock, idle = self._guards()
        async with lock:
            if self._running or self._turn is not turn:
                return  # another call joined meanwhile: the turn goes on
            self._turn = None
            failure, self._failure = self._failure, None
            try:
                await turn.__aexit__(None if failure is None else type(failure), failure, None)
            finally:
                idle.set()

    async def drained(self) -> None:
        """Wait until no turn is open: every call that was running is recorded."""
        await self._guards()[1].wait()


class Shell:
    """What one MCP connection is served: the shell tools of ``session``'s deployment, each call in a turn."""

    def __init__(self, session: HarnessSession) -> None:
        self.session = session
        harness = session.harness
        registry, specs = harness.runtime.ctx.require(TOOLS), harness.tools()
        self.specs = shell_tools(specs, {spec.name: registry.get(spec.name) for spec in specs})
        self._turns = _Turns(session)

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """``tools/list``: the deployment's shell tools, exactly as its registry specs them."""
        return types.ListToolsResult(tools=[mcp_tool(spec) for spec in self.specs])

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """``tools/call``: one call through the deployment's hooks, recorded in the session's transcript."""
        offered = {spec.name for spec in self.specs}
        if params.name not in offered:
            return error_result(f"no tool named '{params.name}'; tools: {', '.join(sorted(offered)) or 'none'}")
        if self.session.harness.changed():  # never run a call under hooks the files no longer say
            return error_result(
                "dsh mcp: the deployment file, a hook file or their trust changed since this connection "
                "opened; nothing ran: reconnect (restart the server) to run under the files as they are now"
            )
        made = call_id(ctx.request_id)
        trace = request_trace(params)
        try:
            return result(
                await self.session.harness.arun(self._turns.call(params.name, params.arguments or {}, made, trace))
            )
        except TranscriptNotSaved as exc:  # it ran; its record failed: the client is told both
            ran = exc.result if isinstance(exc.result, ToolResult) else None
            return error_result(f"{ran.output}\n{exc}" if ran is not None else str(exc))
        except (TurnError, DshError, OSError) as exc:
            return error_result(str(exc))

    async def drained(self) -> None:
        """Wait (from any loop) until every running call is recorded."""
        await self.session.harness.arun(self._turns.drained())


async def _relay(
    source: ObjectReceiveStream[SessionMessage | Exception],
    sink: ObjectSendStream[SessionMessage | Exception],
    replies: ObjectSendStream[SessionMessage],
) -> None:
    """Pass the client's messages on; answer a line that is no JSON-RPC message with a JSON-RPC error.

    The SDK's stdio transport turns such a line into an exception on its read stream, which its
    server drops silently; a client then waits for an answer forever. JSON-RPC 2.0 answers a line
    that is not JSON with ``-32700`` and one that is no valid request with ``-32600``, both with
    ``"id": null`` (the id cannot be told), and the connection goes on.
    """
    async with sink:
        async for item in source:
            if not isinstance(item, Exception):
                await sink.send(item)
                continue
            errors = getattr(item, "errors", None)
            kinds = {e.get("type") for e in errors()} if callable(errors) else set()
            if "json_invalid" in kinds:
                code, text = types.PARSE_ERROR, "Parse error: the line is not JSON"
            else:
                code, text = types.INVALID_REQUEST, "Invalid Request: the line is no JSON-RPC 2.0 message MCP knows"
            reply = types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=text))
            try:
                await replies.send(SessionMessage(reply))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return


class _Signals:
    """SIGTERM, SIGINT and SIGHUP for the server's whole life: while serving one ends it as EOF does.

    Held past the serving (unlike a receiver scoped to it) so a signal during the clean-up (a client
    that sends SIGTERM two seconds after closing stdin, as the SDK's does) is noted instead of
    killing the process before the interrupted turn is recorded.
    """

    def __init__(self) -> None:
        self.caught: list[int] = []
        self.scope: anyio.CancelScope | None = None
        numbers = [getattr(signal, name) for name in ENDING_SIGNALS if hasattr(signal, name)]
        self.close = on_loop(asyncio.get_running_loop(), numbers, self._caught)
        """Give the signals back (dsh.paths.signals, the one owner of the process's handlers)."""

    def _caught(self, number: int) -> None:
        self.caught.append(number)
        if self.scope is not None:
            self.scope.cancel()


MAX_LINE = 64 * 1024 * 1024
"""The longest message line read from a pipe (64 MiB); a longer one is answered as a parse error."""


class _PipeLines:
    """The client's lines from a pipe on stdin, read on the event loop, so a signal can end the read.

    The SDK's stdio transport reads stdin in a worker thread that nothing can interrupt: with the
    client's pipe still open, a server told to stop (SIGTERM) would wait for a line that never comes.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    def close(self) -> None:
        """End the lines here (the transport then winds down), whether or not the client closed its end."""
        self._reader.feed_eof()

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readline()
        except ValueError as exc:  # longer than MAX_LINE: dropped whole, answered as a line that is not JSON
            if "not found" in str(exc):  # only its head was dropped: its tail is no line of its own
                await self._skip_to_line_end()
            return NOT_JSON
        if not line:
            raise StopAsyncIteration
        text = line.decode("utf-8", errors="replace")
        return INVALID if _bad_id(text) else text

    async def _skip_to_line_end(self) -> None:
        """Drop what is left of a line too long to read: up to its newline, or the end of input."""
        while True:
            try:
                await self._reader.readline()
            except ValueError as exc:
                if "not found" in str(exc):
                    continue  # more of it still past the limit
            return


NOT_JSON = "\x00\n"
"""What a dropped line becomes for the SDK's transport: no JSON, so answered ``-32700`` (:func:`_relay`)."""

INVALID = '{"jsonrpc": "2.0"}\n'
"""What a line with an id JSON-RPC does not allow becomes: no message MCP knows, so answered ``-32600``."""


def _bad_id(text: str) -> bool:
    """Whether ``text`` is a JSON object whose ``id`` JSON-RPC 2.0 refuses (a boolean, a fraction, an
    object, an array). The SDK would read such a request as a notification and never answer it."""
    if '"id"' not in text:
        return False
    try:
        message = json.loads(text)
    except ValueError:
        return False  # the transport answers it as no JSON
    if not isinstance(message, dict) or "id" not in message:
        return False
    given = message["id"]
    return not (given is None or isinstance(given, str) or (isinstance(given, int) and not isinstance(given, bool)))


async def _stdin_pipe() -> _PipeLines | None:
    """Stdin's lines when it is a pipe or socket (what an MCP client gives), else None (the SDK's own reader).

    The wire moves to a private descriptor and fd 0 becomes the null device, as the SDK does for its
    own reader, so nothing dsh starts can read the client's messages.
    """
    # Python leaves sys.stdin (sys.stdout) None when fd 0 (1) was closed at start, and the descriptor
    # may since belong to a file it opened: nothing of it is the client's.
    for name, stream in (("input", sys.stdin), ("output", sys.stdout)):
        if stream is None:
            raise DshError(
                f"dsh mcp: standard {name} is not open; an MCP client starts dsh mcp with pipes on its stdin and stdout"
            )
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire, "rb", buffering=0))
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    return _PipeLines(reader)


def _notice(notice: Notice) -> None:
    """Hook messages and warnings go to stderr (the client's server log); stdout is the wire."""
    print(notice_line(notice), file=sys.stderr, flush=True)


async def _serve(deployment: str | None, session_id: str | None, cwd: str | None, version: str) -> int:
    signals = _Signals()
    try:
        await _serve_stdio(deployment, session_id, cwd, version, signals)
    finally:
        signals.close()
    return 128 + signals.caught[0] if signals.caught else 0


async def _serve_stdio(
    deployment: str | None, session_id: str | None, cwd: str | None, version: str, signals: _Signals
) -> None:
    lines = await _stdin_pipe()
    async with stdio_server(stdin=None if lines is None else cast("anyio.AsyncFile[str]", lines)) as (read, write):
        try:
            await _serve_session(read, write, deployment, session_id, cwd, version, signals)
        finally:
            if lines is not None:
                lines.close()  # served out: a signal may end it with the client's end still open


async def _serve_session(
    read: ObjectReceiveStream[SessionMessage | Exception],
    write: ObjectSendStream[SessionMessage],
    deployment: str | None,
    session_id: str | None,
    cwd: str | None,
    version: str,
    signals: _Signals,
) -> None:
    # Booted with fd 1 pointed at stderr (the transport's doing): a plugin's stray output never reaches the wire.
    harness = Harness(deployment=deployment, notify=_notice)
    await anyio.to_thread.run_sync(harness.open)
    try:
        session = await anyio.to_thread.run_sync(lambda: harness.session(session_id, cwd=cwd))
        shell = Shell(session)
        server: Server[Any] = Server(
            SERVER_NAME,
            version=version,
            instructions=(
                f"dsh's managed shell. Every command runs as a call of dsh session {session.id}: the "
                "child sees the harness's facts in $DSH_* variables (env | grep ^DSH_)."
            ),
            on_list_tools=shell.list_tools,
            on_call_tool=shell.call_tool,
        )
        try:
            async with anyio.create_task_group() as group:
                sink, relayed = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                signals.scope = group.cancel_scope
                if signals.caught:  # one came while dsh booted: nothing is served
                    group.cancel_scope.cancel()
                group.start_soon(_relay, read, sink, write)
                await server.run(relayed, write, server.create_initialization_options())
                group.cancel_scope.cancel()
        finally:
            # The client is gone (or a signal came): calls still running were cancelled, their
            # process groups killed; wait for their turns to be recorded before the session ends.
            signals.scope = None
            with anyio.CancelScope(shield=True):
                await shell.drained()
                await anyio.to_thread.run_sync(session.close)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(harness.close)


def serve(
    *, deployment: str | None = None, session_id: str | None = None, cwd: str | None = None, version: str = ""
) -> int:
    """Serve MCP on stdin/stdout until the client goes (EOF) or SIGTERM, SIGINT or SIGHUP; the exit status.

    One dsh session for the connection: a new one in ``cwd`` (default the current directory), or
    the stored ``session_id`` resumed. A :class:`dsh.core.DshError` or ``OSError`` before serving
    (boot, session, lock) is raised as it is, for ``dsh`` to print in one line.

    The process is sealed first (:func:`dsh.paths.seal_process`): a command it runs cannot open
    the protocol's pipes through ``/proc/<server>/fd`` to forge an answer or read a request.
    """
    seal_process()
    try:
        return anyio.run(_serve, deployment, session_id, cwd, version)
    except BaseExceptionGroup as group:
        raise _named(_first(group)) from None
    except OSError as exc:
        raise _named(exc) from None


def _named(exc: BaseException) -> BaseException:
    """``exc``, or for an ``OSError`` that names no file (the pipes to the client: ``dsh mcp >/dev/full``)
    a :class:`DshError` that says so; a client that went away (``BrokenPipeError``) is left to end quietly."""
    if isinstance(exc, OSError) and exc.filename is None and not isinstance(exc, ConnectionError):
        return DshError(f"dsh mcp: the connection to the client (stdin and stdout) failed: {exc.strerror or exc}")
    return exc


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first failure of a task group's exceptions: the one to report (task groups wrap them)."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup) and found.exceptions:
        found = found.exceptions[0]
    return found
