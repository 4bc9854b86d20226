"""A session's events read as a conversation: what every provider's history-to-messages function starts from.

:func:`conversation` is the one reading of a transcript's meaning for a model (which events the
model saw, what answered each tool call); each provider family then writes these items in its own
wire format (``dsh.models.openai.chat_messages``, ``dsh.models.anthropic.messages``). Built from
the events alone, it gives a resumed or forked session exactly the messages the live one had.
"""

import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from dsh.session import SessionEvent
from dsh.session.persistence import BEGAN_EVENT

MISSING_RESULT = "no result: the turn ended before this call finished"
"""The answer a tool call gets when its turn ended (failed, interrupted) before its result was recorded."""


def unknown_outcome(began: Mapping[str, Any]) -> str:
    """What the model is told of a command that began in a run killed before its outcome was recorded."""
    arguments = began.get("arguments")
    command = arguments.get("command") if isinstance(arguments, Mapping) else None
    what = command if isinstance(command, str) else json.dumps(arguments, ensure_ascii=False, default=str)
    return (
        f"[dsh: a {began.get('name')} call of an earlier run of this session began and its outcome is unknown: "
        f"dsh was stopped before recording it (call {began.get('call_id')}). It ran: {what}\n"
        "Its effects may or may not have happened; check before running it again.]"
    )


class Said(NamedTuple):
    """Text the model reads as the user's: a prompt, a Stop hook's steering, or hook context.

    ``source`` is None for the user's own prompt, ``"stop_hook"`` for a blocking Stop hook's
    reason, ``"hook"`` for ``message/context`` a hook added, ``"dsh"`` for a command whose outcome
    is unknown (:func:`unknown_outcome`).
    """

    text: str
    source: str | None = None


class Outcome(NamedTuple):
    """What answered one tool call: its output and whether it failed."""

    call_id: str
    name: str
    output: str
    is_error: bool


class Answered(NamedTuple):
    """One model response: its text, reasoning, tool calls and (in call order) what answered each.

    ``current`` is True for a response after the last user prompt (the open exchange), where a
    provider may send the model's reasoning back; earlier reasoning is not replayed.
    """

    text: str
    reasoning: str
    calls: list[dict[str, Any]]
    outcomes: list[Outcome]
    current: bool


Item = Said | Answered


def conversation(events: Iterable[SessionEvent]) -> list[Item]:
    """The conversation a model has had in a session, oldest first.

    - ``message/user`` (a prompt, or a Stop hook's steering) and ``message/context`` (hook context)
      are :class:`Said`;
    - ``message/assistant`` is :class:`Answered`, with each of its tool calls answered by the
      first ``tool/result`` of that call id (a call answered by none, because its turn failed or
      was interrupted first, gets :data:`MISSING_RESULT` as an error), so every call has its answer;
    - context a hook added while a step's calls ran follows that step's answers (providers need
      the answers right after the calls);
    - ``tool/began`` (a command that began in a run killed before its turn was stored) with no
      ``tool/result`` is :class:`Said` (source ``"dsh"``, :func:`unknown_outcome`): the model learns
      that it may have run;
    - an assistant step with neither text nor calls (an empty final answer) is left out; every
      other event (``turn/*``, ``model/request``, ``hook/result``, ``error``, ``subagent/*``) says
      nothing to the model: a subagent's answer is its ``spawn_agent`` call's result.
    """
    events = list(events)
    results: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.type == "tool/result":
            results.setdefault(str(event.data.get("call_id")), event.data)
    last_user = max((i for i, e in enumerate(events) if e.type == "message/user"), default=-1)
    items: list[Item] = []
    held: list[Said] = []  # context recorded while a step's calls ran
    open_calls = False
    for index, event in enumerate(events):
        data = event.data
        if event.type in ("message/user", "message/assistant", BEGAN_EVENT):
            items.extend(held)
            held.clear()
            open_calls = False
        if event.type == BEGAN_EVENT:
            if str(data.get("call_id")) not in results:
                items.append(Said(unknown_outcome(data), "dsh"))
        elif event.type == "message/user":
            items.append(Said(str(data.get("text", "")), data.get("source")))
        elif event.type == "message/context":
            said = Said(str(data.get("text", "")), str(data.get("source") or "hook"))
            (held if open_calls else items).append(said)
        elif event.type == "message/assistant":
            calls = [dict(c) for c in data.get("tool_calls") or ()]
            text = str(data.get("text") or "")
            if not text and not calls:
                continue
            outcomes = []
            for call in calls:
                found = results.get(str(call.get("id")))
                outcomes.append(
                    Outcome(str(call.get("id")), str(call.get("name")), MISSING_RESULT, True)
                    if found is None
                    else Outcome(
                        str(call.get("id")),
                        str(call.get("name")),
                        str(found.get("output", "")),
                        bool(found.get("is_error")),
                    )
                )
            reasoning = str(data.get("reasoning") or "")
            items.append(Answered(text, reasoning, calls, outcomes, index > last_user))
            open_calls = bool(calls)
    items.extend(held)
    return items
