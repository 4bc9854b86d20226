"""A served ``dsh exec`` request, checked field by field, and how the server sees its client hang up."""

from __future__ import annotations

import math
import os
import select
from collections.abc import Mapping
from typing import Any

from ._exec_argv import command_line
from ._wire import PROTOCOL, WireError


class Request:
    """One validated ``dsh exec`` request."""

    __slots__ = ("command", "cwd", "env", "json", "session", "timeout")

    def __init__(
        self, command: str, env: dict[str, str], cwd: str, session: str | None, timeout: float | None, json: bool
    ) -> None:
        self.command = command
        self.env = env
        self.cwd = cwd
        self.session = session
        self.timeout = timeout
        self.json = json


def request_from(request: Mapping[str, Any], deployment: str | None) -> Request:
    """Validate a request; raise :class:`WireError` naming the first field at fault."""
    if request.get("protocol") != PROTOCOL:
        raise WireError(f"this dsh server speaks protocol {PROTOCOL}, the client {request.get('protocol')!r}")
    argv = request.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(word, str) for word in argv):
        raise WireError("malformed request: 'argv' must be a non-empty list of strings (the command's words)")
    command = command_line(argv)
    if not command.strip():
        raise WireError("malformed request: 'argv' must not be a blank command")
    env = request.get("env")
    if not isinstance(env, dict) or not env:
        # Never fall back to the server's own environment: it is not the caller's.
        raise WireError("malformed request: 'env' must be the client's non-empty environment")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise WireError("malformed request: 'env' must map strings to strings")
    cwd = request.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise WireError("malformed request: 'cwd' must be an absolute path")
    session = request.get("session")
    if session is not None and not isinstance(session, str):
        raise WireError("malformed request: 'session' must be a string or null")
    timeout = request.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0
    ):
        raise WireError("malformed request: 'timeout' must be a positive number of seconds or null")
    asked = request.get("deployment")
    if asked != deployment:
        raise WireError(
            f"this dsh server serves {_deployment_name(deployment)}, not {_deployment_name(asked)}; "
            "run with --no-server"
        )
    wants_json = request.get("json", False)
    if not isinstance(wants_json, bool):
        raise WireError("malformed request: 'json' must be true or false")
    return Request(command, env, cwd, session, None if timeout is None else float(timeout), wants_json)


def _deployment_name(path: object) -> str:
    return "the built-in deployment" if path is None else repr(path) if not isinstance(path, str) else path


def hung_up(sock: Any) -> bool:
    """Whether the peer closed its end entirely (POLLHUP), not only its sending side (a half-close)."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLHUP)
    return bool(poller.poll(0))
