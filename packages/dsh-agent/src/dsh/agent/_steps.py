"""The records of a model-driven turn: a model's step and what the turn produced.

``dsh run`` and subagents use them; ``dsh exec`` runs a single tool call and no model step, so it
never imports this module (each dataclass definition costs a cold start about half a millisecond).
They stay dataclasses: pydantic validates :class:`ModelStep` as a field of a script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from dsh.session import ToolResult

from ._model import ToolCall


@dataclass(frozen=True, kw_only=True)
class ModelStep:
    """One model response: text, and the tool calls to run (none ends the turn).

    ``reasoning`` is the model's reasoning text where the provider returns it (DeepSeek's
    ``reasoning_content``); ``usage`` its token counts (``input_tokens``, ``output_tokens``, and
    what else the provider reports). Both are recorded in the ``message/assistant`` event when set.
    """

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}  # read when a script is validated

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str = ""
    usage: dict[str, int] = field(default_factory=dict)


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
