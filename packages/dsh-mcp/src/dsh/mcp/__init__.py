"""dsh's shell for any harness over the Model Context Protocol: ``dsh mcp``, a stdio MCP server.

Each client connection is one dsh session; every ``tools/call`` runs in a turn through the
deployment's hooks, is recorded in the transcript, and its child gets that session's ``DSH_*``.
"""

from ._command import McpCommand, command, main
from ._server import serve

__all__ = ["McpCommand", "command", "main", "serve"]
