"""What a served ``dsh exec`` connection says, seen from the server: the request checked field by
field, what may follow it while the command runs, and the shapes of the answers."""

import asyncio
import os
import select
import signal
from collections.abc import Mapping
from typing import Any, NamedTuple

from dsh.cli_fast._status import failure_document, interrupted_reason
from dsh.cli_fast._wire import HEADER_SIZE, PROTOCOL, WireError, decode, frame_length
from dsh.paths import INTERRUPTS

from ._output import json_text
from ._parser import command_line, served_reading

HANGUP_POLL = 0.25
"""Seconds between checks whether a client that half-closed its connection has gone entirely."""

CLIENT_GONE = "the client went away"
"""What a turn is recorded as interrupted by when its client closed the connection."""


class Request(NamedTuple):
    """One validated ``dsh exec`` request, its command line read by the one parser."""

    command: str
    env: dict[str, str]
    cwd: str
    session: str | None
    timeout: float | None
    json: bool


class NotServed(Exception):
    """A well-formed request for a line this server does not run: the client runs it in its own process.

    Help and usage errors (which the client prints as it always does), ``--debug``, ``--no-server``
    (an abbreviation of it: the exact word never reaches a server) and another deployment than this
    server's. The message, the answer's ``unserved``, says which.
    """


def request_from(request: Mapping[str, Any], deployment: str | None) -> Request:
    """Validate a request and read its command line with the one parser (``_parser``).

    Raise :class:`WireError` naming the first field at fault, or :class:`NotServed`.
    """
    if request.get("protocol") != PROTOCOL:
        raise WireError(
            f"this dsh server speaks protocol {PROTOCOL}, the client {request.get('protocol')!r}: run both from "
            "the same dsh (restart `dsh serve` after upgrading), or run with --no-server"
        )
    argv = request.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(word, str) for word in argv):
        raise WireError("malformed request: 'argv' must be a non-empty list of strings (the words after `dsh`)")
    env = request.get("env")
    if not isinstance(env, dict) or not env:
        # Never fall back to the server's own environment: it is not the caller's.
        raise WireError("malformed request: 'env' must be the client's non-empty environment")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise WireError("malformed request: 'env' must map strings to strings")
    cwd = request.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise WireError("malformed request: 'cwd' must be an absolute path")
    args = served_reading(argv, deployment, env, cwd)
    if isinstance(args, str):
        raise NotServed(args)
    return Request(
        command_line(args.command),
        env,
        # As given, from the client's folder: the check that it is a folder is the in-process one (`x/..`
        # with no `x`, an empty value are refused as there); the session records it normalised.
        cwd if args.cwd is None else os.path.join(cwd, args.cwd) if args.cwd else args.cwd,
        args.session,
        args.timeout,
        bool(args.json),
    )


def hung_up(sock: Any) -> bool:
    """Whether the peer closed its end entirely (POLLHUP), not only its sending side (a half-close)."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLHUP)
    return bool(poller.poll(0))


async def watch_client(reader: asyncio.StreamReader, sock: Any, idle_timeout: float) -> tuple[str, str]:
    """What the client does while its command runs: ``("interrupt", SIGNAL)``, ``("gone", "")`` or
    ``("malformed", why)``. A half-close (the client shut its sending side and waits for the
    answer) is neither: the command goes on until the client closes entirely."""
    try:
        header = await reader.readexactly(HEADER_SIZE)
        body = await asyncio.wait_for(reader.readexactly(frame_length(header)), idle_timeout)
        message = decode(body)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            return "malformed", f"malformed request: {len(exc.partial)} stray bytes followed the request"
        while not hung_up(sock):
            await asyncio.sleep(HANGUP_POLL)
        return "gone", ""
    except TimeoutError:
        return "malformed", f"malformed request: an incomplete message followed the request for {idle_timeout:g} s"
    except WireError as exc:
        return "malformed", f"{exc} (after the request)"
    except OSError:
        return "gone", ""
    name = message.get("interrupt")
    if set(message) == {"interrupt"} and name in INTERRUPTS:
        return "interrupt", str(name)
    return "malformed", 'malformed request: only {"interrupt": "SIGINT"|"SIGTERM"|...} may follow the request'


def failure_answer(request: Request, error: str) -> dict[str, Any]:
    """The answer of an exec dsh could not run (or record); with ``--json``, its document too."""
    answer: dict[str, Any] = {"ok": False, "error": error}
    if request.json:
        answer["document"] = json_text(failure_document(error))
    return answer


def interrupted_answer(name: str) -> dict[str, Any]:
    """The answer of an exec its client interrupted with signal ``name``: the in-process line and status."""
    return {
        "ok": False,
        "interrupted": name,
        "exit_code": 128 + signal.Signals[name].value,
        "error": interrupted_reason(name),
    }
