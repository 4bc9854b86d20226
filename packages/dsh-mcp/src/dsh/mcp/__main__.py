"""``python -m dsh.mcp``: the MCP server without the ``dsh`` command (see :func:`dsh.mcp.main`)."""

import sys

from ._command import main

sys.exit(main())
