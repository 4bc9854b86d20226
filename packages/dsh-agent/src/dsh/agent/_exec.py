"""``dsh exec``: one command run as the model's bash tool would, as one turn of a session."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from dsh.core import DshError
from dsh.loader import Runtime
from dsh.session import SESSIONS, Session

from ._args import BLOCKED_EXIT
from ._loop import Agent
from ._model import ScriptedModel, ToolCall

if TYPE_CHECKING:
    from dsh.hooks import Notice


@dataclass(frozen=True)
class ExecOutcome:
    """What ``dsh exec --json`` prints (a contract)."""

    session_id: str
    location: dict[str, str] | None
    exit_code: int
    stdout: str
    stderr: str
    notices: tuple[str, ...] = ()
    """Lines for dsh's own stderr (hooks' ``systemMessage``, hook failures); not in ``--json``."""

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` document."""
        document = asdict(self)
        del document["notices"]
        return document


async def exec_command(
    runtime: Runtime,
    command: str,
    *,
    session_id: str | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
) -> ExecOutcome:
    """Run ``command`` through the bash tool in a new session (or ``session_id``'s), as one turn."""
    if not command.strip():
        raise DshError("dsh exec needs a command after --")
    if cwd is not None and not os.path.isdir(cwd):
        raise DshError(f"--cwd {cwd} is not a directory")
    store = runtime.ctx.require(SESSIONS)
    session = store.resume(session_id) if session_id else store.create(cwd)
    notices: list[str] = []
    agent = Agent(runtime.ctx, session, ScriptedModel([]), notify=lambda n: notices.append(notice_line(n)))
    started = await agent.start("resume" if session_id else "startup")
    if started.stop:
        # A SessionStart hook said "continue": false: the command does not run.
        await agent.end()
        why = f"stopped by a SessionStart hook: {started.reason}\n"
        return ExecOutcome(session.id, location_json(session), BLOCKED_EXIT, "", why, tuple(notices))
    arguments: dict[str, Any] = {"command": command}
    if timeout is not None:
        arguments["timeout"] = timeout
    result = await agent.run_tool_turn(ToolCall(name="bash", arguments=arguments))
    await agent.end()
    data = result.data
    if "exit_code" in data:
        code, stdout, stderr = int(data["exit_code"]), str(data["stdout"]), str(data["stderr"])
    else:
        code = BLOCKED_EXIT if data.get("blocked") else 1
        stdout, stderr = "", result.output + "\n"
    return ExecOutcome(session.id, location_json(session), code, stdout, stderr, tuple(notices))


def notice_line(notice: Notice) -> str:
    """How ``dsh`` prints a hook notice: ``dsh: hook: ...`` for a message, ``dsh: warning: ...``."""
    return f"dsh: {'hook' if notice.kind == 'message' else 'warning'}: {notice.text}"


def location_json(session: Session) -> dict[str, str] | None:
    """A session's location as ``--json`` outputs print it."""
    location = session.locate()
    return None if location is None else {"kind": location.kind, "path": location.path}
