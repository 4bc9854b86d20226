"""What a turn produces, and what it records of a tool's result."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dsh.session import ToolResult

from ._model import ToolCall


@dataclass
class TurnResult:
    """What one turn produced."""

    turn_id: str
    text: str = ""
    tool_results: list[tuple[ToolCall, ToolResult]] = field(default_factory=list)
    blocked: str | None = None
    """Why a UserPromptSubmit hook blocked the turn, if it did."""
    stopped: str | None = None
    """Why a hook ended the turn early (``continue: false`` and its ``stopReason``), if one did."""


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
