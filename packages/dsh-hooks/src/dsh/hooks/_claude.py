"""The Claude Code dialect: everything Claude Code's hooks do differently, in one place.

Its files are ``settings.json``-style (``hooks``, ``disableAllHooks``) with command handlers that may
carry an exec form (``args``), ``shell``, an ``if`` permission rule (:mod:`._rules`) and ``once``;
plugin folders (:mod:`._plugins`) add hook files. Matchers of plain names are exact lists; identical
command hooks of an event run once. Tools carry Claude Code's names (``Bash``, ``Agent`` with
``subagent_type``; Bash ``timeout`` in milliseconds; the Bash result's ``stdout``, ``stderr``,
``interrupted``, ``isImage``); payloads carry only the keys of the SDK's hook input types, leave out
keys without a value and give ``transcript_path`` as a string (``""`` for none), or a view of the
session in Claude Code's own format (:mod:`._transcript`). Hooks get ``CLAUDE_PROJECT_DIR``,
``CLAUDE_CODE_SESSION_ID`` and, for a plugin's, ``CLAUDE_PLUGIN_ROOT`` and ``CLAUDE_PLUGIN_DATA``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._dialect import HookDialect, TranscriptViews

if TYPE_CHECKING:
    from pathlib import Path

    from dsh.core import Context
    from dsh.session import SessionHeader

    from ._table import HookCommand, HookTable

_SHELL_TOOLS = frozenset({"bash", "pwsh"})

PROJECT_DIR = "CLAUDE_PROJECT_DIR"
SESSION_ID = "CLAUDE_CODE_SESSION_ID"
ENV_FILE = "CLAUDE_ENV_FILE"
PLUGIN_ROOT = "CLAUDE_PLUGIN_ROOT"
PLUGIN_DATA = "CLAUDE_PLUGIN_DATA"
IDENTITY_VARIABLES = frozenset({SESSION_ID, ENV_FILE, PROJECT_DIR, PLUGIN_ROOT, PLUGIN_DATA})
"""What Claude Code tells its children (and hooks) about their session, project, plugin and env file."""

TOOL_NAMES: Mapping[str, str] = {
    "bash": "Bash",
    "pwsh": "PowerShell",
    "bash_output": "BashOutput",
    "bash_stop": "KillShell",
    "spawn_agent": "Agent",
}
TOOL_ALIASES: Mapping[str, tuple[str, ...]] = {"Agent": ("Task",)}
"""``Task`` is the subagent tool's older name; matchers may still use it."""

TOOL_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"})
"""Events where an ``if`` rule is checked (it is ignored on the others)."""

_IDENTITY = ("session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode", "agent_id", "agent_type")

# The keys of the SDK's hook input types (required and optional), per event dsh fires.
EVENT_KEYS: Mapping[str, frozenset[str]] = {
    event: frozenset({*_IDENTITY, *extra})
    for event, extra in {
        "SessionStart": ("source", "model"),
        "SessionEnd": ("reason",),
        "UserPromptSubmit": ("prompt",),
        "PreToolUse": ("tool_name", "tool_input", "tool_use_id"),
        "PostToolUse": ("tool_name", "tool_input", "tool_response", "tool_use_id"),
        "PostToolUseFailure": ("tool_name", "tool_input", "tool_use_id", "error", "is_interrupt"),
        "PermissionRequest": ("tool_name", "tool_input"),
        "PostToolBatch": ("tool_calls",),
        "StopFailure": ("error", "error_details", "last_assistant_message"),
        "Stop": ("stop_hook_active", "last_assistant_message"),
        "SubagentStart": (),
        "SubagentStop": ("stop_hook_active", "agent_transcript_path", "last_assistant_message"),
    }.items()
}


class ClaudeCode(HookDialect):
    """Claude Code's hooks (see the module docstring)."""

    name = "claude"
    peer = "Claude Code"
    identity_variables = IDENTITY_VARIABLES
    events = frozenset(
        {
            *("PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "PermissionRequest"),
            *("PermissionDenied", "UserPromptSubmit", "UserPromptExpansion", "Notification", "Stop"),
            *("StopFailure", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "SessionStart"),
            *("SessionEnd", "Setup", "ConfigChange", "CwdChanged", "FileChanged", "InstructionsLoaded"),
            *("WorktreeCreate", "WorktreeRemove", "TeammateIdle", "TaskCreated", "TaskCompleted"),
            *("Elicitation", "ElicitationResult", "MessageDisplay", "PreModelSwitch", "PostModelSwitch"),
            *("DirectoryAdded", "PreSkillShellCommand"),
        }
    )
    handler_types = frozenset({"command", "http", "prompt", "agent", "mcp_tool"})
    command_fields = frozenset(
        {"type", "command", "args", "timeout", "async", "asyncRewake", "shell", "if", "once", "statusMessage"}
    )
    async_fields = ("async", "asyncRewake")  # dsh has no rewake: it runs detached as async does

    exact_name_matchers = True
    runs_duplicates_once = True

    tool_names = TOOL_NAMES
    tool_aliases = TOOL_ALIASES
    known_tools = frozenset(
        {
            *TOOL_NAMES.values(),
            *(alias for names in TOOL_ALIASES.values() for alias in names),
            *("Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS", "NotebookEdit", "NotebookRead"),
            *("WebFetch", "WebSearch", "TodoWrite", "ExitPlanMode", "EnterPlanMode", "Skill", "SlashCommand"),
            *("KillBash", "AskUserQuestion", "ToolSearch", "Monitor", "TaskOutput", "TaskStop", "LSP"),
        }
    )
    failed_tool_event = "PostToolUseFailure"
    env_file_names = (ENV_FILE,)
    placeholders = (PROJECT_DIR, PLUGIN_ROOT, PLUGIN_DATA)

    event_keys = EVENT_KEYS
    omits_nulls = True

    def disabled(self, raw: Mapping[str, Any]) -> bool:
        return raw.get("disableAllHooks") is True

    def command_extras(self, raw: Mapping[str, Any], bad: Callable[[str], None]) -> dict[str, Any] | None:
        from ._rules import parse_rule

        args = raw.get("args")
        if args is not None and (not isinstance(args, list) or not all(isinstance(a, str) for a in args)):
            bad("'args' must be a list of strings")
            return None
        shell = raw.get("shell", "bash")
        if shell not in ("bash", "powershell"):
            bad(f'\'shell\' must be "bash" or "powershell", not {shell!r}')
            return None
        condition = raw.get("if")
        if condition is not None and (not isinstance(condition, str) or parse_rule(condition) is None):
            bad(f"'if' must be a permission rule such as \"Bash(git *)\", not {condition!r}")
            return None
        return {
            "args": None if args is None else tuple(args),
            "shell": shell,
            "condition": condition,
            "once": raw.get("once") is True,
        }

    def condition_applies(
        self, hook: HookCommand, event: str, tool: str | None, tool_input: Mapping[str, Any] | None
    ) -> bool:
        """An ``if`` rule is checked on tool events only, against the call as Claude Code's tool takes it."""
        if hook.condition is None or event not in TOOL_EVENTS or tool is None:
            return True
        from ._rules import parse_rule, rule_matches

        rule = parse_rule(hook.condition)
        name = self.tool_names.get(tool, tool)
        subjects = (name, *self.tool_aliases.get(name, ()))
        return rule is not None and rule_matches(rule, subjects, self.tool_input(tool, tool_input or {}))

    def hook_env(self, hook: HookCommand, header: SessionHeader) -> dict[str, str]:
        env = {PROJECT_DIR: header.cwd, SESSION_ID: header.id}
        env.update(plugin_env(hook))
        return env

    def path_value(self, path: str | None) -> str:
        return path or ""  # always a string; "" when persistence has no local file

    def tool_input(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        value = dict(arguments)
        if tool in _SHELL_TOOLS and _seconds(value.get("timeout")):
            value["timeout"] = round(value["timeout"] * 1000)
        if tool == "spawn_agent" and "agent_type" in value:
            value["subagent_type"] = value.pop("agent_type")
        return value

    def dsh_input(self, tool: str, peer_input: Mapping[str, Any]) -> dict[str, Any]:
        value = dict(peer_input)
        if tool in _SHELL_TOOLS and _seconds(value.get("timeout")):
            value["timeout"] = value["timeout"] / 1000
        if tool == "spawn_agent" and "subagent_type" in value:
            value["agent_type"] = value.pop("subagent_type")
        return value

    def tool_response(self, tool: str, response: Mapping[str, Any]) -> dict[str, Any]:
        """The Bash result with Claude Code's keys (published PostToolUse hooks read them), dsh's beside."""
        value = dict(response)
        if tool in _SHELL_TOOLS:
            value.setdefault("stdout", "")
            value.setdefault("stderr", "")
            value["interrupted"] = bool(value.get("timed_out")) or bool(value.get("interrupted"))
            value["isImage"] = False
        return value

    def stop_error(self, kind: str) -> str:
        return "server_error" if kind == "overloaded" else kind  # Claude Code has no "overloaded"

    def transcript_views(self, home: Path, model: str) -> TranscriptViews:
        from ._transcript import ClaudeTranscripts

        return ClaudeTranscripts(home, model, self)

    def wants_view(self, hook: HookCommand, mode: str) -> bool:
        """Every hook with ``all`` (the default), plugin hooks only with ``plugins``, none with ``off``."""
        return mode == "all" or (mode == "plugins" and hook.plugin_root is not None)

    def extra_tables(self, ctx: Context, config: Any, base: Path | None, home: Path | None) -> list[HookTable]:
        """The hooks of the config's ``claude_plugins`` folders (whose ``skills/`` join the skills service)."""
        folders = getattr(config, "claude_plugins", None) or []
        if not folders:
            return []
        from ._plugins import load_claude_plugin, load_plugin_skills, plugin_names

        plugins = [load_claude_plugin(path, base, home) for path in folders]
        plugin_names(plugins)
        for loaded in plugins:
            load_plugin_skills(ctx, loaded)
        return [p.table for p in plugins]


def plugin_env(hook: HookCommand) -> dict[str, str]:
    """A plugin hook's folders, as Claude Code names them (Codex sets them too)."""
    env = {}
    if hook.plugin_root is not None:
        env[PLUGIN_ROOT] = hook.plugin_root
    if hook.plugin_data is not None:
        env[PLUGIN_DATA] = hook.plugin_data
    return env


def _seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


DIALECT = ClaudeCode()
"""The Claude Code dialect."""
