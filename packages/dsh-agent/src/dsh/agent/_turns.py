"""What a turn records of a tool's result (what a turn produces is ``_steps.TurnResult``)."""

from __future__ import annotations

import json
from typing import Any

from dsh.session import ToolResult


def recorded(result: ToolResult) -> dict[str, Any]:
    """The ``data`` a ``tool/result`` event records and PostToolUse hooks see: JSON-able, ``blocked`` when refused."""
    data = dict(result.data)
    if result.blocked:
        data["blocked"] = True
    try:
        # The common case (shell tools) is JSON already: checked by one encoding, not rebuilt.
        json.dumps(data)
        return data
    except (TypeError, ValueError):
        return dict(json.loads(json.dumps(data, default=str)))
