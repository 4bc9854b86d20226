"""``dsh sessions show``: a stored transcript as a person reads it.

Only the shape of events is assumed (``type`` plus data); an event this module does not know is
shown as its type and data, so a newer transcript never fails to print.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from dsh.session import SessionEvent, SessionHeader

_INDENT = "    "


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "?"


def _block(text: str, prefix: str = _INDENT) -> Iterator[str]:
    for line in text.rstrip("\n").splitlines():
        yield prefix + line


def _command(name: str, arguments: Mapping[str, Any]) -> str:
    if name in ("bash", "pwsh") and isinstance(arguments.get("command"), str):
        extra = {k: v for k, v in arguments.items() if k != "command"}
        return f"$ {arguments['command']}" + (f"   ({name} {json.dumps(extra)})" if extra else "")
    return f"{name} {json.dumps(dict(arguments), ensure_ascii=False)}"


def _tool_result(data: Mapping[str, Any]) -> Iterator[str]:
    details = data.get("data") or {}
    if "exit_code" in details:
        status = f"exit {details['exit_code']}"
        if details.get("timed_out"):
            status += " (timed out)"
        yield f"{_INDENT}-> {status}"
        yield from _block(str(details.get("stdout") or ""), _INDENT + "| ")
        yield from _block(str(details.get("stderr") or ""), _INDENT + "! ")
    else:
        yield f"{_INDENT}-> {'error' if data.get('is_error') else 'ok'}"
        yield from _block(str(data.get("output") or ""), _INDENT + "| ")


def _hooks(data: Mapping[str, Any]) -> Iterator[str]:
    reports = data.get("reports") or []
    if not reports:
        return
    yield f"{_INDENT}hook {data.get('event', '?')}: {len(reports)} ran"
    for report in reports:
        verdict = "blocked" if report.get("blocked") else "stopped" if report.get("stop") else "ok"
        reason = report.get("error") or report.get("reason") or report.get("stop_reason")
        line = f"{_INDENT * 2}{report.get('command', '?')} -> exit {report.get('exit_code')}, {verdict}"
        yield line + (f": {reason}" if reason else "")
        if report.get("system_message"):
            yield f"{_INDENT * 3}message: {report['system_message']}"


def children_of(header: SessionHeader, stored: Iterable[SessionHeader]) -> list[SessionHeader]:
    """The sessions ``header``'s session started: its subagents and forks (``parent_session``), and
    the dsh runs started in its shells (``outer_session``, as they claim), oldest first."""
    sid = header.id
    return [h for h in stored if h.id != sid and (h.parent_session == sid or h.outer_session == sid)]


def render(
    header: SessionHeader,
    location: str | None,
    events: Sequence[SessionEvent],
    children: Sequence[SessionHeader] = (),
) -> Iterator[str]:
    """Lines of a readable transcript: turns, user text, tool calls with output and status, hooks.

    ``children`` (see :func:`children_of`) are named under the call that started each, and listed
    after the header, so a reader can walk the tree both ways."""
    origin = f", {header.origin} of {header.parent_session}" if header.parent_session else ""
    yield f"session {header.id}{origin}"
    yield f"  created {header.created_at}, cwd {header.cwd}, agent depth {header.delegation_depth}"
    if header.outer_session is not None:
        call = f"call {header.outer_call} of " if header.outer_call else ""
        yield f"  started inside {call}session {header.outer_session} (as claimed by its environment)"
    yield f"  transcript {location}" if location else "  transcript: none on this machine (not a file backend)"
    by_call: dict[str, list[SessionHeader]] = {}
    for child in children:
        how = child.origin or "session"
        if child.outer_session == header.id and child.outer_call:
            by_call.setdefault(child.outer_call, []).append(child)
            yield f"  child: call {child.outer_call} started session {child.id}"
        else:
            yield f"  child: {how} session {child.id}"
    for event in events:
        try:
            lines = list(_event(event.type, event.data, event.at))
            if event.type == "tool/call":
                started = by_call.get(str(event.data.get("call_id")), ())
                lines.extend(f"{_INDENT}started session {child.id}" for child in started)
        except (AttributeError, KeyError, TypeError, ValueError):
            # A transcript is data from disk: a wrongly typed field marks its event, never ends the listing.
            lines = [f"  [{event.type}: unexpected data] {_raw(event.data)}"]
        yield from lines


def _raw(data: object) -> str:
    try:
        return json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a cycle or a non-string key
        return repr(data)


def _event(kind: str, data: Mapping[str, Any], at: float) -> Iterable[str]:
    if kind == "turn/start":
        how = f", {data['source']}" if data.get("source") else ""
        return ["", f"== turn {data.get('turn_id', '?')} ({data.get('agent', 'main')}{how}) at {_when(at)}"]
    if kind == "turn/end":
        notes = [f"blocked: {data['blocked']}" if data.get("blocked") else ""]
        notes.append("interrupted" if data.get("interrupted") else "")
        notes.append(f"failed: {data['failed']}" if data.get("failed") else "")
        note = ", ".join(n for n in notes if n)
        return [f"== end of turn{f' ({note})' if note else ''}"]
    if kind == "message/user":
        source = f" (from {data['source']})" if data.get("source") else ""
        return [f"user{source}:", *_block(str(data.get("text", "")))]
    if kind == "message/assistant":
        text = str(data.get("text") or "")
        return ["assistant:", *_block(text)] if text else []
    if kind == "tool/call":
        return [f"  {_command(str(data.get('name', '?')), data.get('arguments') or {})}   [{data.get('call_id')}]"]
    if kind == "tool/result":
        return list(_tool_result(data))
    if kind == "tool/began":  # written ahead: here when its turn was never stored (or is still running)
        turn = f" in turn {data['turn_id']}" if data.get("turn_id") else ""
        return [
            f"  {_command(str(data.get('name', '?')), data.get('arguments') or {})}   [{data.get('call_id')}]",
            f"{_INDENT}-> began at {_when(at)}{turn}; outcome unknown: not recorded "
            "(dsh was stopped while it ran, or its turn is still running)",
        ]
    if kind == "hook/result":
        return list(_hooks(data))
    if kind == "message/context":
        return [f"context (from a {data.get('event', '?')} hook):", *_block(str(data.get("text", "")))]
    if kind == "tool/input_updated":
        rewritten = _command(str(data.get("name", "?")), data.get("arguments") or {})
        return [f"  rewritten by a PreToolUse hook: {rewritten}"]
    if kind == "subagent/start":
        return [f"  subagent {data.get('agent_type', '?')} started: session {data.get('session_id')}"]
    if kind == "subagent/end":
        return [f"  subagent session {data.get('session_id')} ended:", *_block(str(data.get("text") or ""), "    | ")]
    if kind == "error":
        return [f"  error: {data.get('message')}"]
    if kind == "model/request":
        return []  # what the model was offered: the same every turn in the common case; --json shows it
    if kind == "session/fork":
        return [f"  forked from {data.get('parent_session')} after turn {data.get('at_turn')}"]
    return [f"  [{kind}] {_raw(data)}"]
