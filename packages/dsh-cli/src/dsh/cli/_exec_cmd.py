"""The ``dsh exec`` and ``dsh serve`` verbs, and ``dsh run``'s driver.

``dsh exec`` runs its one turn without an event loop (:func:`dsh.bash.run_blocking`) unless a hook
(or an executor without ``run_sync``) needs one: asyncio is imported only then (see :mod:`._drive`).
"""

from __future__ import annotations

import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from dsh.agent import needs_event_loop
from dsh.bash import Interrupted, Interrupts, run_blocking
from dsh.cli_fast._status import exec_notices, exec_status
from dsh.cli_fast._streams import write_outputs

from ._drive import interruptible as _interruptible
from ._drive import run_async
from ._errors import UsageError
from ._exec import ExecOutcome, exec_command
from ._open import open_runtime
from ._output import print_json
from ._parser import command_line

if TYPE_CHECKING:
    import argparse


def interruptible(main: Coroutine[Any, Any, int]) -> int:
    """Run ``main`` under asyncio; on a signal of ``INTERRUPTS`` (SIGINT, SIGTERM, ...) cancel it (its
    finally blocks flush), exit 128+N."""
    return _interruptible(lambda interrupts: run_async(main, interrupts))


def exec_verb(args: argparse.Namespace) -> int:
    """``dsh exec``: one command as one turn, in this process."""
    command = command_line(args.command)
    if not command:
        raise UsageError("dsh exec needs a command after --", option="--", value=command)

    def main(interrupts: Interrupts) -> int:
        with open_runtime(choice=args.choice) as runtime:
            blocking = not needs_event_loop(runtime.ctx, "bash")
            turn = exec_command(runtime, command, session_id=args.session, cwd=args.cwd, timeout=args.timeout)
            outcome = run_blocking(turn) if blocking else run_async(turn, interrupts)
        code = _report(outcome, json_output=args.json)
        if outcome.interrupted is not None:  # shown and recorded: the interruption's own line and status follow
            raise Interrupted(outcome.interrupted)
        return code

    return _interruptible(main)


def _report(outcome: ExecOutcome, *, json_output: bool) -> int:
    for line in outcome.notices:
        print(line, file=sys.stderr)
    result = outcome.as_json()
    lost = None
    if json_output:
        print_json(result)
    else:
        lost = write_outputs(outcome.stdout, outcome.stderr)
    for line in exec_notices(result):
        print(line, file=sys.stderr)
    if lost is not None:  # the command's stderr and notices are out: now stdout's failure
        raise lost
    return exec_status(result)


def serve_verb(args: argparse.Namespace) -> int:
    """``dsh serve``: keep the deployment loaded and answer ``dsh exec`` clients."""
    import asyncio

    from dsh.harness import LiveRuntime

    from ._serve import serve

    async def main() -> int:
        with LiveRuntime(args.choice) as live:
            return await serve(live, args.choice.path, idle_timeout=args.idle_timeout, keepalive=args.keepalive)

    return asyncio.run(main())
