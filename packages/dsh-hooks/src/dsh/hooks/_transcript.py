"""A session's transcript in Claude Code's own ``.jsonl`` format: a derived view hooks can read.

Claude Code writes one JSON object a line: ``user`` and ``assistant`` messages (``message.role``,
``message.content`` of ``text``, ``thinking``, ``tool_use`` and ``tool_result`` blocks), chained by
``uuid`` / ``parentUuid``, with ``sessionId``, ``cwd`` and ``timestamp``. Published hooks (loop
plugins, stop-rule engines, chat loggers) read it: ``grep '"role":"assistant"' | tail -1``, then the
text blocks of that line. This module keeps such a file for each session under
``<DSH_HOME>/transcripts/claude-code/<session-id>.jsonl`` (0600, in 0700 folders), brought up to
date from the session's events each time a hook is handed its path.

It is a view, never the source of truth: nothing dsh does reads it back. The session's events are;
the view is rebuilt from them when this process first hands it out (or finds it changed under it)
and appended to afterwards, one line per new message, so a hook sees the conversation up to the
moment it runs (the events of the open turn included, which the store holds only after the flush).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsh.paths import create_private_file, ensure_private_dir
from dsh.session import SessionEvent, SessionHeader

from ._dialect import HookDialect

VIEW_FOLDER = ("transcripts", "claude-code")
"""Where the views live under the home."""

_NAMESPACE = uuid.UUID("5b0e4a0c-2f6e-4a3e-9d1f-6d7368686b73")
"""Line uuids are derived from (session, event, part), so a rebuilt view has the same ones."""

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class _Lines:
    """What rendering needs to remember between calls: the chain's end and the tool calls announced."""

    __slots__ = ("dialect", "header", "model", "parent", "tool_ids")

    def __init__(self, header: SessionHeader, model: str, dialect: HookDialect) -> None:
        self.header = header
        self.model = model
        self.dialect = dialect
        self.parent: str | None = None
        self.tool_ids: dict[str, str] = {}
        """dsh call id -> the ``tool_use`` id an assistant line gave it (a supplied id may differ)."""

    def line(self, index: int, part: int, kind: str, message: dict[str, Any], at: float, **extra: Any) -> str:
        line_id = str(uuid.uuid5(_NAMESPACE, f"{self.header.id}/{index}/{part}"))
        record = {
            "parentUuid": self.parent,
            "isSidechain": self.header.parent_session is not None,
            "userType": "external",
            "cwd": self.header.cwd,
            "sessionId": self.header.id,
            "type": kind,
            "message": message,
            **extra,
            "uuid": line_id,
            "timestamp": datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
        self.parent = line_id
        # Compact separators, as Claude Code writes: hooks grep for '"role":"assistant"'.
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"

    def render(self, index: int, event: SessionEvent) -> list[str]:
        """The view's lines for one session event (none for events the model never saw)."""
        data, at = event.data, event.at
        if event.type == "message/user":
            meta = {"isMeta": True} if data.get("source") else {}
            return [self.line(index, 0, "user", {"role": "user", "content": str(data.get("text", ""))}, at, **meta)]
        if event.type == "message/context":
            message = {"role": "user", "content": str(data.get("text", ""))}
            return [self.line(index, 0, "user", message, at, isMeta=True)]
        if event.type == "message/assistant":
            return self._assistant(index, data, at)
        if event.type == "tool/call":
            return self._unannounced_call(index, data, at)
        if event.type == "tool/result":
            return self._result(index, data, at)
        return []

    def _assistant(self, index: int, data: Mapping[str, Any], at: float) -> list[str]:
        content: list[dict[str, Any]] = []
        if data.get("reasoning"):
            content.append({"type": "thinking", "thinking": str(data["reasoning"]), "signature": ""})
        if data.get("text"):
            content.append({"type": "text", "text": str(data["text"])})
        calls = [c for c in data.get("tool_calls") or () if isinstance(c, Mapping)]
        for call in calls:
            content.append(self._tool_use(call.get("id"), call.get("name"), call.get("arguments")))
        if not content:
            return []
        usage = data.get("usage")
        figures = (
            {k: usage[k] for k in _USAGE_KEYS if isinstance(usage.get(k), int)} if isinstance(usage, Mapping) else {}
        )
        message = {
            "id": "msg_" + uuid.uuid5(_NAMESPACE, f"{self.header.id}/{index}/message").hex,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": figures,
        }
        return [self.line(index, 0, "assistant", message, at)]

    def _tool_use(self, call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
        tool = str(name)
        given = str(call_id or "")
        self.tool_ids.setdefault(given, given)
        arguments = arguments if isinstance(arguments, Mapping) else {}
        return {
            "type": "tool_use",
            "id": given,
            "name": self.dialect.tool_names.get(tool, tool),
            "input": self.dialect.tool_input(tool, arguments),
        }

    def _unannounced_call(self, index: int, data: Mapping[str, Any], at: float) -> list[str]:
        """A call no assistant line announced (``dsh exec``'s, an outside loop's) gets one of its own."""
        call_id = str(data.get("call_id") or "")
        supplied = data.get("supplied_call_id")
        if isinstance(supplied, str) and supplied in self.tool_ids:
            self.tool_ids[call_id] = supplied
            return []
        if call_id in self.tool_ids:
            return []
        block = self._tool_use(call_id, data.get("name"), data.get("arguments"))
        message: dict[str, Any] = {
            "id": "msg_" + uuid.uuid5(_NAMESPACE, f"{self.header.id}/{index}/message").hex,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [block],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {},
        }
        return [self.line(index, 0, "assistant", message, at)]

    def _result(self, index: int, data: Mapping[str, Any], at: float) -> list[str]:
        call_id = str(data.get("call_id") or "")
        tool = str(data.get("name") or "")
        output, is_error = str(data.get("output", "")), bool(data.get("is_error"))
        block = {
            "type": "tool_result",
            "tool_use_id": self.tool_ids.get(call_id, call_id),
            "content": output,
            "is_error": is_error,
        }
        given = data.get("data")
        recorded: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        result = self.dialect.tool_response(tool, {**recorded, "output": output, "is_error": is_error})
        return [self.line(index, 0, "user", {"role": "user", "content": [block]}, at, toolUseResult=result)]


class _View:
    """One view this process wrote, and how far it got (updated as events are appended)."""

    __slots__ = ("count", "identity", "lines", "path")

    def __init__(self, path: Path, lines: _Lines, count: int, identity: tuple[int, int, int]) -> None:
        self.path = path
        self.lines = lines
        self.count = count
        """Events rendered so far."""
        self.identity = identity
        """(device, inode, size) of the file as this process last left it."""


class ClaudeTranscripts:
    """Claude-Code-format views of sessions, kept under ``<home>/transcripts/claude-code/``."""

    def __init__(self, home: Path, model: str, dialect: HookDialect) -> None:
        self._folder = home.joinpath(*VIEW_FOLDER)
        self._model = model
        self._dialect = dialect
        self._views: dict[str, _View] = {}

    def path_for(self, header: SessionHeader) -> Path:
        """Where the view of ``header``'s session lives (session ids never hold a path separator)."""
        return self._folder / f"{header.id}.jsonl"

    def update(self, header: SessionHeader, events: Callable[[], Sequence[SessionEvent]]) -> str:
        """Bring the view of ``header``'s session up to ``events()`` and return its path.

        Appends the lines of the events not rendered yet; rebuilds the file (a fresh 0600 file put
        in place atomically) the first time this process hands it out, or when the file is not as
        this process left it. Raises ``OSError`` when it cannot be written.
        """
        known = list(events())
        view = self._views.get(header.id)
        if view is not None and view.count <= len(known):
            fd = self._open_unchanged(view)
            if fd is not None:
                with os.fdopen(fd, "a", encoding="utf-8") as handle:
                    for index in range(view.count, len(known)):
                        handle.writelines(view.lines.render(index, known[index]))
                    handle.flush()
                    info = os.fstat(handle.fileno())
                view.count, view.identity = len(known), (info.st_dev, info.st_ino, info.st_size)
                return str(view.path)
        return str(self._rebuild(header, known).path)

    def _open_unchanged(self, view: _View) -> int | None:
        """The view opened for appending, when it is still the file this process wrote; else None."""
        try:
            fd = os.open(view.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino, info.st_size) == view.identity:
            return fd
        os.close(fd)
        return None

    def _rebuild(self, header: SessionHeader, known: Sequence[SessionEvent]) -> _View:
        folder = ensure_private_dir(self._folder, "Claude Code transcript folder")
        path = self.path_for(header)
        lines = _Lines(header, self._model, self._dialect)
        temporary = folder / f".{header.id}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        fd = create_private_file(temporary)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                for index, event in enumerate(known):
                    handle.writelines(lines.render(index, event))
                handle.flush()
                info = os.fstat(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            raise
        view = _View(path, lines, len(known), (info.st_dev, info.st_ino, info.st_size))
        self._views[header.id] = view
        return view

    def forget(self, session_id: str) -> None:
        """Drop what this process remembers of a session's view (the file stays)."""
        self._views.pop(session_id, None)
