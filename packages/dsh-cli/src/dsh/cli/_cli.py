"""The ``dsh`` command in this process: parse, choose the deployment, hand the verb to its module.

Each verb lives in its own module (``_exec_cmd``, ``_run_cmd``, ``_env_cmd``, ``_sessions_view``,
``_sessions_cmd``, ``_skills_cmd``) and is imported only when it runs; a verb another distribution adds
(the ``dsh.commands`` group, ``_commands``) is imported by the parser only when it is the one named.
This module owns only the dispatch and how a failure becomes one ``dsh:`` line and an exit status.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING

from dsh.cli_fast._client import _stop_loading
from dsh.cli_fast._status import FAILURE_EXIT, failure_document
from dsh.cli_fast._streams import quiet_stdout
from dsh.cli_fast._warnings import released
from dsh.core import DshError, describe
from dsh.paths import signals
from dsh.paths.deployment import choose_deployment, relative_home
from dsh.paths.log import capture_warnings, configure_command
from dsh.session import SessionLockedError, SessionNotFoundError

from ._errors import not_found_hint

if TYPE_CHECKING:
    from collections.abc import Sequence


def _own_session_hint(args: argparse.Namespace, exc: BaseException) -> str:
    """Why the session of the very shell running this command cannot be opened yet, if that is the case."""
    wanted = getattr(args, "session", None) or getattr(args, "id", None)
    if not wanted or wanted != os.environ.get("DSH_SESSION_ID"):
        return ""
    if isinstance(exc, SessionNotFoundError):
        return (
            f" (session {wanted} is the one this shell belongs to: its first turn is still running and is "
            "written when that turn ends)"
        )
    if isinstance(exc, SessionLockedError):
        return f" (session {wanted} is the one this shell belongs to: its current turn holds it until the turn ends)"
    return ""


def dispatch(args: argparse.Namespace) -> int:
    """Run a parsed ``dsh`` command line in this process; return the exit status."""
    # The command reports failures itself (boot report, warnings); --debug adds the library's log.
    configure_command(debug=args.debug)
    capture_warnings(released())  # those raised while dsh started, then every later one
    if args.verb not in ("exec", "run") and signals.current(signal.SIGINT) is _stop_loading:
        # Loaded: from here Ctrl-C unwinds (finally blocks run). exec and run keep the loading
        # handler until their own interrupts take over (see `_drive.interruptible`).
        signals.install(signal.SIGINT, signal.default_int_handler)
    try:
        refused = relative_home()
        if refused is not None:
            raise DshError(refused)
        args.choice = choose_deployment(getattr(args, "deployment", None))
        if args.verb == "exec":
            from ._exec_cmd import exec_verb

            return exec_verb(args)
        if args.verb in ("serve", "run"):
            import gc

            gc.enable()  # these run for long: the console script turned collection off for one-shot verbs
            from ._exec_cmd import interruptible, serve_verb

            if args.verb == "serve":
                return serve_verb(args)
            from ._run_cmd import run_verb

            return interruptible(run_verb(args))
        if args.verb in ("env", "plugins"):
            from ._env_cmd import env_verb, plugins_verb

            return env_verb(args) if args.verb == "env" else plugins_verb(args)
        command = getattr(args, "plugin_command", None)
        if command is not None:  # a verb of the dsh.commands group (see `_commands`)
            import gc

            gc.enable()  # it may run for long (`dsh mcp` serves a client until it goes)
            try:
                code: int = command.run(args)
            except (DshError, OSError):
                raise  # the verb's own one-line refusal
            except Exception as exc:  # a bug of a third party's verb: one line naming it, not a traceback
                raise DshError(
                    f"`dsh {args.verb}` ({args.plugin_source}) failed: {describe(exc)}; this is a fault of that "
                    "distribution (--debug shows where)"
                ) from exc
            return code
        if args.verb == "skills":
            from ._skills_cmd import skills

            return skills(args)
        if args.action in ("fork", "verify"):
            from . import _sessions_cmd

            return _sessions_cmd.fork(args) if args.action == "fork" else _sessions_cmd.verify(args)
        from ._sessions_view import sessions_verb

        return sessions_verb(args)
    except BrokenPipeError:
        # The reader went away (`dsh sessions list | head -1`): stop quietly, as shell tools do.
        quiet_stdout()
        return 128 + signal.SIGPIPE
    except (DshError, OSError) as exc:
        if args.debug:
            import traceback

            traceback.print_exc()
        message = f"{exc}{_own_session_hint(args, exc) or not_found_hint(exc)}"
        print(f"dsh: {message}", file=sys.stderr)
        if getattr(args, "json", False):
            # A --json caller reads stdout: it gets a document saying what failed, never nothing.
            from ._output import print_json

            print_json(failure_document(message) if args.verb == "exec" else {"error": message})
        # `dsh exec` keeps 0-124 and 126+ for the command, as `timeout` and `env` do.
        return FAILURE_EXIT if args.verb == "exec" else 1
    except KeyboardInterrupt:  # SIGINT before a verb's own handling was installed (start-up)
        from dsh.cli_fast._status import interrupted_early

        print(f"dsh: {interrupted_early('SIGINT')}", file=sys.stderr)
        return 128 + signal.SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dsh`` in this process (never through ``dsh serve``); return the exit status."""
    from ._parser import parse

    return dispatch(parse(argv))
