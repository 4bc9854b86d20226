"""``dsh mcp``: the verb dsh-cli finds in the ``dsh.commands`` group and imports only when it runs."""

from __future__ import annotations

import argparse
import os

from dsh.cli import UsageError


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
            raise UsageError(
                "--cwd applies to a new session; a resumed session (--session) runs in its own recorded directory",
                option="--cwd",
                value=args.cwd,
            )
        if args.cwd is not None and not os.path.isdir(args.cwd):
            raise UsageError(f"--cwd {args.cwd} is not a directory", option="--cwd", value=args.cwd)
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
