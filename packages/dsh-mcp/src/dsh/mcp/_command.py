"""``dsh mcp``: the verb dsh-cli finds in the ``dsh.commands`` group and imports only when it runs.

dsh-mcp does not depend on dsh-cli: the group's contract is a structural one (``configure`` and
``run``), and a wrong option is a :class:`dsh.core.DshError`, which ``dsh`` prints as one line.
The same object serves ``python -m dsh.mcp`` and the ``dsh-mcp`` script (``__main__``), where
dsh-cli is not installed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from dsh.core import DshError
from dsh.paths.deployment import choose_deployment, relative_home
from dsh.paths.log import configure_command


class McpCommand:
    """``dsh mcp [--deployment FILE] [--session ID] [--cwd DIR]``: serve dsh's shell over MCP on stdio."""

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The verb's options (``--deployment`` and ``--debug`` are dsh-cli's)."""
        parser.description = (
            "Serve dsh's bash tool (and its background companions) to an MCP client over stdio.\n"
            "The connection is one dsh session: every call runs through the deployment's hooks, is\n"
            "recorded in the session's transcript, and its child gets that session's DSH_* variables.\n"
            "Register it with a client, for example: claude mcp add dsh -- dsh mcp"
        )
        parser.add_argument("--session", metavar="ID", help="resume this stored session instead of creating one")
        parser.add_argument(
            "--cwd", metavar="DIR", help="working directory of a new session (default: the current one)"
        )

    def run(self, args: argparse.Namespace) -> int:
        """Serve until the client goes; the exit status (0, or 128+N after signal N)."""
        from importlib.metadata import version

        from ._server import serve

        if args.cwd is not None and args.session is not None:
            raise DshError(
                "--cwd applies to a new session; a resumed session (--session) runs in its own recorded directory"
            )
        if args.cwd is not None and not os.path.isdir(args.cwd):
            raise DshError(f"--cwd {args.cwd} is not a directory")
        # The deployment dsh-cli chose by its rule (--deployment, $DSH_DEPLOYMENT, the home's file, the default).
        deployment = args.choice.path if args.choice is not None else None
        return serve(
            deployment=deployment,
            session_id=args.session,
            cwd=None if args.cwd is None else os.path.abspath(args.cwd),
            version=version("dsh-mcp"),
        )


command = McpCommand()
"""The ``mcp`` entry point of the ``dsh.commands`` group."""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dsh.mcp`` and the ``dsh-mcp`` script: ``dsh mcp`` where dsh-cli is not installed.

    The same options (``--deployment``, ``--debug``, ``--session``, ``--cwd``), the same choice of
    deployment (:func:`dsh.paths.deployment.choose_deployment`), the same one ``dsh:`` line and
    status 1 for a failure before the server serves.
    """
    parser = argparse.ArgumentParser(prog="dsh-mcp", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--deployment",
        metavar="FILE",
        help="deployment YAML; default: $DSH_DEPLOYMENT, else $DSH_HOME/deployment.yaml if it exists, "
        "else the built-in one",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    command.configure(parser)
    args = parser.parse_args(argv)
    configure_command(debug=args.debug)
    try:
        refused = relative_home()
        if refused is not None:
            raise DshError(refused)
        args.choice = choose_deployment(args.deployment)
        return command.run(args)
    except (DshError, OSError) as exc:
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"dsh: {exc}", file=sys.stderr)
        return 1
