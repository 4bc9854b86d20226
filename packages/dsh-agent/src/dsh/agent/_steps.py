"""The records of a model-driven turn: a model's step and what the turn produced.

``dsh run``, subagents and model providers use them (``dsh exec`` runs a single tool call and no
model step, but imports them with ``dsh.agent``: two records, cheap to define). Both are
``NamedTuple``s; pydantic validates :class:`ModelStep` (and its :class:`~dsh.agent.ToolCall`) as a
field of a script, from a mapping, refusing unknown keys.
"""

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from dsh.session import EMPTY_MAPPING, ToolResult

from ._model import ToolCall


class ModelStep(NamedTuple):
    """One model response: text, and the tool calls to run (none ends the turn).

    ``reasoning`` is the model's reasoning text where the provider returns it (DeepSeek's
    ``reasoning_content``); ``usage`` its token counts (``input_tokens``, ``output_tokens``, and
    what else the provider reports). Both are recorded in the ``message/assistant`` event when set.
    """

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    reasoning: str = ""
    usage: Mapping[str, int] = EMPTY_MAPPING


class TurnResult(NamedTuple):
    """What one turn produced."""

    turn_id: str
    text: str = ""
    tool_results: tuple[tuple[ToolCall, ToolResult], ...] = ()
    """Each call the model made and its result, in the order the model asked for them."""
    blocked: str | None = None
    """Why a UserPromptSubmit hook blocked the turn, if it did."""
    stopped: str | None = None
    """Why a hook ended the turn early (``continue: false`` and its ``stopReason``), if one did."""
    failed: str | None = None
    """Why the turn failed without an exception (it reached ``max_steps``), if it did; ``turn/end`` says the same."""
