"""Entry point of the ``dsh`` command, with the fast path of ``dsh exec`` through ``dsh serve``.

Standard library only until it knows no server is listening: then it imports the full command.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from dsh.paths import UntrustedPathError, check_trusted

from ._args import (
    FAILURE_EXIT,
    build_parser,
    choose_deployment,
    command_line,
    exec_notices,
    exec_status,
    socket_path,
)
from ._wire import PROTOCOL, WireError, encode, peer_uid, recv_frame

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from typing import Any

CONNECT_TIMEOUT = 10.0
"""Seconds to connect and hand the request over; the answer is awaited as long as the command runs."""


def _warn(message: str) -> None:
    print(f"dsh: warning: {message}", file=sys.stderr)


def _connect(path: Path) -> socket.socket | None:
    """A connection to our own user's server at ``path``; None (with a warning if suspicious) otherwise.

    Nothing is sent before the run directory, the socket's owner and the peer's uid are checked.
    """
    try:
        info = path.lstat()
    except OSError:
        return None  # no server (or no usable home): the in-process path says what is wrong
    try:
        check_trusted(path.parent.parent)
    except (UntrustedPathError, OSError):
        return None  # the in-process path refuses such a home with the one-line fix
    try:
        check_trusted(path.parent, "dsh serve's run directory")
    except UntrustedPathError as exc:
        _warn(f"{exc}; running in this process")
        return None
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.geteuid():
        _warn(f"ignoring {path}: not a socket owned by you (uid {os.geteuid()}); running in this process")
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(str(path))
        uid = peer_uid(sock)
    except OSError:
        sock.close()
        return None  # a socket left by a server that is gone: run in this process
    if uid is not None and uid != os.geteuid():
        sock.close()
        _warn(
            f"ignoring the dsh server at {path}: it runs as uid {uid}, not as you (uid {os.geteuid()}); "
            "running in this process"
        )
        return None
    return sock


def _served_exec(args: Any) -> int | None:
    """Run ``dsh exec`` through a listening ``dsh serve``; None when there is none to ask."""
    path = socket_path(choose_deployment(args.deployment).path)
    request = {
        "protocol": PROTOCOL,
        "command": command_line(args.command),
        "cwd": os.path.abspath(args.cwd) if args.cwd else os.getcwd(),
        "env": dict(os.environ),
        "session": args.session,
        "timeout": args.timeout,
    }
    try:
        frame = encode(request)
    except WireError as exc:
        _warn(f"not using dsh serve: {exc}; running in this process")
        return None
    sock = _connect(path)
    if sock is None:
        return None
    with sock:
        try:
            sock.sendall(frame)
        except BrokenPipeError:
            pass  # the server refused the request and closed: its answer says why
        except OSError as exc:
            print(f"dsh: cannot send to the dsh server at {path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        sock.settimeout(None)  # the command may legitimately run for as long as its timeout allows
        try:
            answer = recv_frame(sock)
        except (OSError, WireError) as exc:
            print(f"dsh: the dsh server at {path} sent no valid answer: {exc}", file=sys.stderr)
            return 1
    if answer is None:
        print(f"dsh: the dsh server at {path} closed the connection before answering", file=sys.stderr)
        return 1
    for warning in answer.get("warnings", []):
        _warn(str(warning))
    for line in answer.get("notices", []):
        print(line, file=sys.stderr)
    if not answer.get("ok"):
        print(f"dsh: {answer.get('error')}", file=sys.stderr)
        # dsh exec keeps 0-124 and 126+ for the command: its own failures are 125, served or not.
        code = answer.get("exit_code", FAILURE_EXIT)
        return code if isinstance(code, int) else FAILURE_EXIT
    result = answer["result"]
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(result["stdout"])
        sys.stdout.flush()
        sys.stderr.write(result["stderr"])
    for line in exec_notices(result):
        print(line, file=sys.stderr)
    return exec_status(result)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line; serve ``dsh exec`` through ``dsh serve`` when one listens."""
    args = build_parser().parse_args(argv)
    if args.verb == "exec" and not args.debug and not args.no_server and command_line(args.command):
        code = _served_exec(args)
        if code is not None:
            return code
    from .cli import dispatch

    return dispatch(args)


def run() -> None:
    """The ``dsh`` console script."""
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away before the last of the output (`dsh env | head -1`): end quietly,
        # with the status a shell tool killed by SIGPIPE has, not an "Exception ignored" line.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = code or 141
    # Everything the command built lives until exit: freezing it spares the interpreter's
    # final collection a walk over every object (about a fifth of a cold `dsh exec`, measured).
    # The work is done and flushed by now; nothing waits on a collector-run finaliser.
    gc.freeze()
    sys.exit(code)
