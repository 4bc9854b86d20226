"""Entry point of the ``dsh`` command, with the fast path of ``dsh exec`` through ``dsh serve``.

Standard library only until it knows no server is listening: then it imports the full command.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from ._args import PROTOCOL, build_parser, choose_deployment, command_line, socket_path


def _served_exec(args: Any) -> int | None:
    """Run ``dsh exec`` through a listening ``dsh serve``; None when there is none to ask."""
    path = socket_path(choose_deployment(args.deployment).path)
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None  # a socket left by a server that is gone: run in this process
    request = {
        "protocol": PROTOCOL,
        "command": command_line(args.command),
        "cwd": os.path.abspath(args.cwd) if args.cwd else os.getcwd(),
        "env": dict(os.environ),
        "session": args.session,
        "timeout": args.timeout,
    }
    with sock, sock.makefile("rwb") as stream:
        stream.write(json.dumps(request).encode() + b"\n")
        stream.flush()
        line = stream.readline()
    if not line:
        print(f"dsh: the dsh server at {path} closed the connection before answering", file=sys.stderr)
        return 1
    answer = json.loads(line)
    for warning in answer.get("warnings", []):
        print(f"dsh: warning: {warning}", file=sys.stderr)
    for line in answer.get("notices", []):
        print(line, file=sys.stderr)
    if not answer["ok"]:
        print(f"dsh: {answer['error']}", file=sys.stderr)
        return 1
    result = answer["result"]
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(result["stdout"])
        sys.stdout.flush()
        sys.stderr.write(result["stderr"])
    return int(result["exit_code"])


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
    sys.exit(main())
