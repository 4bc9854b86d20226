"""The Claude-Code-format transcript view (issue 23, item 4): its lines, and that it grows in place."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dsh.hooks._claude import DIALECT as CLAUDE
from dsh.hooks._transcript import ClaudeTranscripts
from dsh.session import SessionEvent, SessionHeader


def _header(tmp_path: Path, **extra: Any) -> SessionHeader:
    return SessionHeader(id="s-1", created_at="2026-12-02T00:00:00Z", cwd=str(tmp_path), **extra)


def _lines(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_messages_tool_calls_and_results_become_claude_code_lines(tmp_path: Path) -> None:
    events = [
        SessionEvent(type="turn/start", data={"turn_id": "t1"}),
        SessionEvent(type="message/user", data={"text": "list it"}),
        SessionEvent(
            type="message/assistant",
            data={
                "text": "Listing.",
                "reasoning": "ls will do",
                "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "ls", "timeout": 2}}],
                "usage": {"input_tokens": 10, "output_tokens": 3},
            },
        ),
        SessionEvent(type="tool/call", data={"call_id": "c1", "name": "bash", "arguments": {"command": "ls"}}),
        SessionEvent(type="hook/result", data={"event": "PreToolUse", "reports": []}),
        SessionEvent(
            type="tool/result",
            data={"call_id": "c1", "name": "bash", "output": "a\n", "is_error": False, "data": {"stdout": "a\n"}},
        ),
        SessionEvent(type="message/context", data={"text": "note", "source": "hook"}),
    ]
    path = ClaudeTranscripts(tmp_path / "home", "m-1", CLAUDE).update(_header(tmp_path), lambda: events)
    user, assistant, result, context = _lines(path)
    assert user["type"] == "user" and user["message"] == {"role": "user", "content": "list it"}
    assert user["parentUuid"] is None and user["sessionId"] == "s-1" and user["cwd"] == str(tmp_path)
    assert user["isSidechain"] is False and user["timestamp"].endswith("Z")
    message = assistant["message"]
    assert message["role"] == "assistant" and message["model"] == "m-1" and message["stop_reason"] == "tool_use"
    assert message["content"] == [
        {"type": "thinking", "thinking": "ls will do", "signature": ""},
        {"type": "text", "text": "Listing."},
        {"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "ls", "timeout": 2000}},
    ]
    assert message["usage"] == {"input_tokens": 10, "output_tokens": 3}
    assert result["message"]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "a\n", "is_error": False}
    ]
    assert result["toolUseResult"]["stdout"] == "a\n" and result["toolUseResult"]["interrupted"] is False
    assert context["isMeta"] is True and context["message"]["content"] == "note"
    chain = [user, assistant, result, context]
    assert [line["parentUuid"] for line in chain[1:]] == [line["uuid"] for line in chain[:-1]]
    assert '"role":"assistant"' in Path(path).read_text()  # compact, as the peer writes and hooks grep


def test_a_call_no_assistant_announced_gets_an_assistant_line_and_a_supplied_id_is_kept(tmp_path: Path) -> None:
    events = [
        SessionEvent(type="tool/call", data={"call_id": "c1", "name": "bash", "arguments": {"command": "true"}}),
        SessionEvent(type="tool/result", data={"call_id": "c1", "name": "bash", "output": "", "is_error": False}),
        SessionEvent(type="message/assistant", data={"text": "", "tool_calls": [{"id": "bad id", "name": "bash"}]}),
        SessionEvent(type="tool/call", data={"call_id": "c2", "name": "bash", "supplied_call_id": "bad id"}),
        SessionEvent(type="tool/result", data={"call_id": "c2", "name": "bash", "output": "x", "is_error": True}),
    ]
    path = ClaudeTranscripts(tmp_path / "home", "m", CLAUDE).update(_header(tmp_path), lambda: events)
    lines = _lines(path)
    assert [line["type"] for line in lines] == ["assistant", "user", "assistant", "user"]
    assert lines[0]["message"]["content"][0]["id"] == "c1"
    assert lines[3]["message"]["content"][0]["tool_use_id"] == "bad id"
    assert lines[3]["message"]["content"][0]["is_error"] is True


def test_the_view_is_private_and_appended_to_not_rewritten(tmp_path: Path) -> None:
    events = [SessionEvent(type="message/user", data={"text": "one"})]
    views = ClaudeTranscripts(tmp_path / "home", "m", CLAUDE)
    path = Path(views.update(_header(tmp_path), lambda: events))
    assert path == tmp_path / "home" / "transcripts" / "claude-code" / "s-1.jsonl"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    first, inode = path.read_text(), path.stat().st_ino
    events.append(SessionEvent(type="message/assistant", data={"text": "two"}))
    views.update(_header(tmp_path), lambda: events)
    assert path.stat().st_ino == inode and path.read_text().startswith(first)
    assert len(_lines(str(path))) == 2
    views.update(_header(tmp_path), lambda: events)  # nothing new: nothing written
    assert len(_lines(str(path))) == 2


def test_a_view_changed_under_it_is_rebuilt_from_the_events(tmp_path: Path) -> None:
    events = [SessionEvent(type="message/user", data={"text": "one"})]
    views = ClaudeTranscripts(tmp_path / "home", "m", CLAUDE)
    path = Path(views.update(_header(tmp_path), lambda: events))
    path.write_text("planted\n")
    os.chmod(path, 0o644)
    events.append(SessionEvent(type="message/assistant", data={"text": "two"}))
    views.update(_header(tmp_path), lambda: events)
    assert [line["type"] for line in _lines(str(path))] == ["user", "assistant"]
    assert path.stat().st_mode & 0o777 == 0o600
    # Another process (a fresh runner) rebuilds it with the same line ids.
    again = ClaudeTranscripts(tmp_path / "home", "m", CLAUDE)
    before = _lines(str(path))
    again.update(_header(tmp_path), lambda: events)
    assert _lines(str(path)) == before


def test_a_subagent_session_is_a_sidechain(tmp_path: Path) -> None:
    header = _header(tmp_path, parent_session="p-1", origin="subagent", delegation_depth=1)
    events = [SessionEvent(type="message/user", data={"text": "sub"})]
    (line,) = _lines(ClaudeTranscripts(tmp_path / "home", "m", CLAUDE).update(header, lambda: events))
    assert line["isSidechain"] is True and line["sessionId"] == "s-1"
