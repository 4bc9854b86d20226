"""The ``dsh exec`` and ``dsh serve`` verbs, and how both kinds of run are interrupted."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from dsh.core import DshError

from ._exec import exec_command
from ._exec_argv import command_line
from ._output import print_json
from ._runtime import open_runtime
from ._serve import serve
from ._status import INTERRUPTS as INTERRUPT_NAMES
from ._status import exec_notices, exec_status, interrupted_reason

INTERRUPTS = tuple(signal.Signals[name] for name in INTERRUPT_NAMES)
"""Signals that interrupt ``dsh exec`` and ``dsh run``: the command's group is killed, the turn flushed."""


def interruptible(main: Coroutine[Any, Any, int]) -> int:
    """Run ``main``; on SIGINT, SIGTERM or SIGHUP cancel it (its finally blocks flush) and exit 128+N."""

    async def runner() -> int:
        loop = asyncio.get_running_loop()
        work = asyncio.ensure_future(main)
        caught: list[signal.Signals] = []

        def interrupt(sig: signal.Signals) -> None:
            if not caught:
                caught.append(sig)
                work.cancel(sig.name)

        for sig in INTERRUPTS:
            loop.add_signal_handler(sig, interrupt, sig)
        try:
            await asyncio.wait({work})
        finally:
            for sig in INTERRUPTS:
                loop.remove_signal_handler(sig)
        if not caught:
            return work.result()
        if not work.cancelled() and work.exception() is not None:
            print(f"dsh: {work.exception()}", file=sys.stderr)
        print(f"dsh: {interrupted_reason(caught[0].name)}", file=sys.stderr)
        return 128 + caught[0].value

    return asyncio.run(runner())


async def exec_verb(args: argparse.Namespace) -> int:
    """``dsh exec``: one command as one turn, in this process."""
    command = command_line(args.command)
    if not command:
        raise DshError("dsh exec needs a command after --")
    with open_runtime(choice=args.choice) as runtime:
        outcome = await exec_command(runtime, command, session_id=args.session, cwd=args.cwd, timeout=args.timeout)
    for line in outcome.notices:
        print(line, file=sys.stderr)
    result = outcome.as_json()
    if args.json:
        print_json(result)
    else:
        sys.stdout.write(outcome.stdout)
        sys.stdout.flush()
        sys.stderr.write(outcome.stderr)
    for line in exec_notices(result):
        print(line, file=sys.stderr)
    return exec_status(result)


async def serve_verb(args: argparse.Namespace) -> int:
    """``dsh serve``: keep the deployment loaded and answer ``dsh exec`` clients."""
    with open_runtime(choice=args.choice) as runtime:
        return await serve(runtime, args.choice.path, idle_timeout=args.idle_timeout)
