"""Gemini CLI's hooks, as its hooks reference describes them.

Files are ``settings.json``-style: ``{"hooks": {"BeforeTool": [{"matcher": ..., "sequential": ...,
"hooks": [{"type": "command", "command": ..., "name": ..., "timeout": <ms>, "description": ...}]}]}}``.
dsh's hook points map to Gemini's events (``UserPromptSubmit`` -> ``BeforeAgent``, ``Stop`` ->
``AfterAgent``, ``PreToolUse`` -> ``BeforeTool``, ``PostToolUse`` -> ``AfterTool``, and the model
request's ``BeforeModel`` / ``AfterModel``). Tool matchers are regular expressions (one that does not
compile is the literal name), lifecycle matchers exact strings. Exit 0 lets the stdout JSON decide
(``decision`` ``deny``/``block``, ``reason``, ``continue``, ``stopReason``, ``systemMessage``,
``hookSpecificOutput``); plain stdout is a message for the user; exit 2 blocks with stderr as the
reason; any other status is a warning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from dsh.hooks.dialect import HookDialect, HookFacts, HookReport
from dsh.session import SessionHeader

PROJECT_DIR = "GEMINI_PROJECT_DIR"
CWD = "GEMINI_CWD"
SESSION_ID = "GEMINI_SESSION_ID"
PLANS_DIR = "GEMINI_PLANS_DIR"
CLAUDE_PROJECT_DIR = "CLAUDE_PROJECT_DIR"
"""Gemini CLI sets Claude Code's project variable too, for hooks written for Claude Code."""
IDENTITY_VARIABLES = frozenset({PROJECT_DIR, CWD, SESSION_ID, PLANS_DIR, CLAUDE_PROJECT_DIR})
"""What Gemini CLI tells its hooks (and its shell's children) about their session and project."""

SHELL_TOOL = "run_shell_command"
"""Gemini CLI's shell tool: dsh's ``bash`` (and ``pwsh``) as its matchers and payloads name them."""

POINTS: Mapping[str, str] = {
    "SessionStart": "SessionStart",
    "SessionEnd": "SessionEnd",
    "UserPromptSubmit": "BeforeAgent",
    "Stop": "AfterAgent",
    "BeforeModel": "BeforeModel",
    "AfterModel": "AfterModel",
    "PreToolUse": "BeforeTool",
    "PostToolUse": "AfterTool",
}
"""dsh's hook points and the Gemini event each fires (Gemini has no subagent or permission events)."""

TOOL_EVENTS = frozenset({"BeforeTool", "AfterTool"})
BLOCKING_EVENTS = frozenset({"BeforeAgent", "AfterAgent", "BeforeModel", "AfterModel", "BeforeTool", "AfterTool"})
"""Events where exit 2 or ``decision: "deny"`` acts; on the others (advisory) they are only reported."""

_BASE = ("session_id", "transcript_path", "cwd", "hook_event_name", "timestamp")
EVENT_KEYS: Mapping[str, frozenset[str]] = {
    event: frozenset({*_BASE, *extra})
    for event, extra in {
        "SessionStart": ("source",),
        "SessionEnd": ("reason",),
        "BeforeAgent": ("prompt",),
        "AfterAgent": ("prompt", "prompt_response", "stop_hook_active"),
        "BeforeModel": ("llm_request",),
        "AfterModel": ("llm_request", "llm_response"),
        "BeforeTool": ("tool_name", "tool_input"),
        "AfterTool": ("tool_name", "tool_input", "tool_response"),
    }.items()
}

_SOURCES = {"fork": "startup"}
"""dsh's SessionStart sources Gemini does not have, as the nearest it does (``startup``, ``resume``, ``clear``)."""


class GeminiCli(HookDialect):
    """Gemini CLI's hooks (see the module docstring)."""

    name = "gemini"
    peer = "Gemini CLI"
    identity_variables = IDENTITY_VARIABLES
    events = frozenset(
        {
            *("SessionStart", "SessionEnd", "BeforeAgent", "AfterAgent", "BeforeModel", "AfterModel"),
            *("BeforeToolSelection", "BeforeTool", "AfterTool", "PreCompress", "Notification"),
        }
    )
    handler_types = frozenset({"command"})
    command_fields = frozenset({"type", "command", "name", "timeout", "description"})
    group_fields = frozenset({"matcher", "sequential", "hooks"})
    timeout_unit = 0.001
    default_timeout = 60.0
    tool_events = TOOL_EVENTS
    gate_events = frozenset({"BeforeTool", "BeforeAgent", "BeforeModel"})
    async_fields = ()
    runs_duplicates_once = True

    tool_names: Mapping[str, str] = {"bash": SHELL_TOOL, "pwsh": SHELL_TOOL}
    known_tools = frozenset(
        {
            SHELL_TOOL,
            *("read_file", "read_many_files", "write_file", "replace", "list_directory", "glob"),
            *("search_file_content", "web_fetch", "google_web_search", "save_memory", "write_todos"),
        }
    )
    failed_tool_event = "PostToolUse"
    event_keys = EVENT_KEYS

    def peer_event(self, point: str) -> str | None:
        return POINTS.get(point)

    def matches(self, matcher: str, subjects: Sequence[str], event: str) -> bool:
        """Tool events: a regular expression searched in the tool name (one that does not compile is
        compared as the literal name); lifecycle events: the exact string."""
        matcher = matcher.strip()
        if not matcher or matcher == "*":
            return True
        if event not in TOOL_EVENTS:
            return matcher in subjects
        import re

        try:
            pattern = re.compile(matcher)
        except re.error:
            return matcher in subjects
        return any(pattern.search(value) is not None for value in subjects)

    def invalid_matcher(self, matcher: str) -> str | None:
        return None  # a matcher that is no regular expression is a literal name to Gemini CLI

    def hook_env(self, hook: Any, header: SessionHeader) -> dict[str, str]:
        return {PROJECT_DIR: header.cwd, CWD: header.cwd, SESSION_ID: header.id, CLAUDE_PROJECT_DIR: header.cwd}

    def path_value(self, path: str | None) -> str:
        return path or ""

    def tool_response(self, tool: str, response: Mapping[str, Any]) -> dict[str, Any]:
        """The result as Gemini's tools report it (``llmContent``, ``returnDisplay``, ``error`` when it
        failed), dsh's own keys beside."""
        value = dict(response)
        output = str(response.get("output", ""))
        value.setdefault("llmContent", output)
        value.setdefault("returnDisplay", output)
        if response.get("is_error"):
            value.setdefault("error", output)
        return value

    def extra_fields(self, event: str, facts: HookFacts) -> dict[str, Any]:
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        fields: dict[str, Any] = {"timestamp": stamp}
        given = facts.fields
        if event == "SessionStart" and isinstance(given.get("source"), str):
            fields["source"] = _SOURCES.get(given["source"], given["source"])
        if event == "AfterAgent":
            fields["prompt"] = given.get("prompt") or ""
            fields["prompt_response"] = given.get("last_assistant_message") or ""
        if event in ("BeforeModel", "AfterModel"):
            messages = given.get("messages") or []
            fields["llm_request"] = {
                "model": given.get("model_name", facts.model),
                "messages": [
                    {"role": "model" if m.get("role") == "assistant" else "user", "content": m.get("content", "")}
                    for m in messages
                    if isinstance(m, Mapping)
                ],
                "config": {},
            }
        if event == "AfterModel":
            calls = given.get("response_tool_calls") or []
            fields["llm_response"] = {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [p for p in [given.get("response_text") or ""] if p]},
                        "finishReason": "STOP",
                        **({"functionCalls": list(calls)} if calls else {}),
                    }
                ],
            }
        return fields

    def interpret(
        self,
        event: str,
        command: str,
        exit_code: int,
        stdout: str,
        stderr: str,
        tool: str | None = None,
        tool_input: Mapping[str, Any] | None = None,
    ) -> HookReport:
        base = HookReport(self.name, event, command, exit_code, stdout, stderr)
        if exit_code == 2:
            why = stderr.strip() or f"blocked by hook: {command}"
            if event not in BLOCKING_EVENTS:
                return base._replace(error=f"exited 2 ({event} cannot block): {why[:500]}")
            return base._replace(blocked=True, reason=why)
        if exit_code != 0:
            return base._replace(error=f"exited with status {exit_code}: {stderr.strip()[:500]}".rstrip(": "))
        output = _json(stdout)
        if output is None:  # plain text: Gemini CLI allows and shows it as a message
            text = stdout.strip()
            return base._replace(system_message=text) if text else base
        specific_raw = output.get("hookSpecificOutput")
        specific: Mapping[str, Any] = specific_raw if isinstance(specific_raw, Mapping) else {}
        advisory = event not in BLOCKING_EVENTS  # flow-control fields are ignored there
        blocked = not advisory and output.get("decision") in ("deny", "block")
        stop = not advisory and output.get("continue") is False
        updated = None
        override = specific.get("tool_input")
        if event == "BeforeTool" and not blocked and isinstance(override, Mapping) and tool is not None:
            merged = {**(tool_input or {}), **override}  # merges with and overrides the model's arguments
            updated = self.dsh_input(tool, merged)
        return base._replace(
            blocked=blocked,
            reason=_text(output.get("reason")) if blocked else None,
            stop=stop,
            stop_reason=(_text(output.get("stopReason")) or _text(output.get("reason"))) if stop else None,
            updated_input=updated,
            additional_context=_text(specific.get("additionalContext")),
            system_message=_text(output.get("systemMessage")),
        )


def _json(stdout: str) -> Mapping[str, Any] | None:
    text = stdout.strip()
    if not text:
        return None
    try:
        value = json.loads(text)
        if isinstance(value, str):  # Gemini CLI reads a JSON string holding the object, too
            value = json.loads(value)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, Mapping) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


DIALECT = GeminiCli()
"""The Gemini CLI dialect (the ``gemini`` entry of ``dsh.hook_dialects``)."""
