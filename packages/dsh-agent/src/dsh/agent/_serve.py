"""``dsh serve``: one loaded deployment answering ``dsh exec`` clients over a Unix socket.

A served ``dsh exec`` behaves as an in-process one: the command gets the client's environment as
its ambient environment (minus ``DSH_*`` and credential-shaped names, as always), the client's
working directory, and a session of its own; the deployment is re-read for new distributions at
every turn. What it saves is the start-up: interpreter, imports, models, distribution scan.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from dsh.bash import AMBIENT_ENV
from dsh.core import DshError
from dsh.loader import Runtime

from ._args import PROTOCOL, socket_path
from ._exec import exec_command
from ._runtime import warnings


def _claim(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # left behind by a server that is gone
        else:
            raise DshError(f"a dsh server already listens on {path}")
        finally:
            probe.close()


async def _answer(runtime: Runtime, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("protocol") != PROTOCOL:
        return {
            "ok": False,
            "error": f"this dsh server speaks protocol {PROTOCOL}, the client {request.get('protocol')}",
        }
    try:
        outcome = await exec_command(
            runtime,
            str(request["command"]),
            session_id=request.get("session"),
            cwd=request.get("cwd"),
            timeout=request.get("timeout"),
        )
    except DshError as exc:
        return {"ok": False, "error": str(exc)}
    print(f"dsh serve: exec in session {outcome.session_id} exited {outcome.exit_code}", file=sys.stderr, flush=True)
    return {"ok": True, "result": outcome.as_json(), "warnings": warnings(runtime), "notices": list(outcome.notices)}


async def _handle(runtime: Runtime, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        request = json.loads(await reader.readline())
        token = AMBIENT_ENV.set(dict(request.get("env") or {}))
        try:
            # The task copies this context, so the command sees the client's environment.
            work = asyncio.ensure_future(_answer(runtime, request))
        finally:
            AMBIENT_ENV.reset(token)
        hangup = asyncio.ensure_future(reader.read())
        done, _ = await asyncio.wait({work, hangup}, return_when=asyncio.FIRST_COMPLETED)
        if work not in done:
            work.cancel()  # the client went away: kill its command's process group
            with contextlib.suppress(asyncio.CancelledError, DshError):
                await work
            return
        hangup.cancel()
        writer.write(json.dumps(work.result()).encode() + b"\n")
        await writer.drain()
    except (ValueError, KeyError, TypeError) as exc:
        writer.write(json.dumps({"ok": False, "error": f"malformed request: {exc}"}).encode() + b"\n")
    finally:
        writer.close()


async def serve(runtime: Runtime, deployment: str | None) -> int:
    """Listen until SIGINT or SIGTERM; remove the socket on the way out."""
    path = socket_path(deployment)
    _claim(path)
    server = await asyncio.start_unix_server(lambda r, w: _handle(runtime, r, w), path=str(path))
    os.chmod(path, 0o600)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"dsh serve: listening on {path}", file=sys.stderr, flush=True)
    try:
        async with server:
            await stop.wait()
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return 0
