"""``dsh exec``: one command run as the model's bash tool would, as one turn of a session."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from dsh.core import DshError
from dsh.loader import Runtime
from dsh.session import SESSIONS, Session

from ._args import BLOCKED_EXIT
from ._loop import Agent
from ._model import ScriptedModel, ToolCall


@dataclass(frozen=True)
class ExecOutcome:
    """What ``dsh exec --json`` prints (a contract)."""

    session_id: str
    location: dict[str, str] | None
    exit_code: int
    stdout: str
    stderr: str

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` document."""
        return asdict(self)


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
    agent = Agent(runtime.ctx, session, ScriptedModel([]))
    await agent.start("resume" if session_id else "startup")
    arguments: dict[str, Any] = {"command": command}
    if timeout is not None:
        arguments["timeout"] = timeout
    result = await agent.run_tool_turn(ToolCall(name="bash", arguments=arguments))
    data = result.data
    if "exit_code" in data:
        code, stdout, stderr = int(data["exit_code"]), str(data["stdout"]), str(data["stderr"])
    else:
        code = BLOCKED_EXIT if data.get("blocked") else 1
        stdout, stderr = "", result.output + "\n"
    return ExecOutcome(session.id, location_json(session), code, stdout, stderr)


def location_json(session: Session) -> dict[str, str] | None:
    """A session's location as ``--json`` outputs print it."""
    location = session.locate()
    return None if location is None else {"kind": location.kind, "path": location.path}
