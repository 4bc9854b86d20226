"""Existing hook configurations, written as the peers' documentation writes them, through real ``dsh``.

Each test puts a Claude Code ``settings.json``-style file at ``$DSH_HOME/hooks/claude.json`` (or a
Codex ``hooks.json`` at ``codex.json``), which the default deployment loads, and runs the real
``dsh exec`` / ``dsh run`` in a child process.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import dsh

pytestmark = pytest.mark.integration

PY = shlex.quote(sys.executable)

# The validator from the peers' guides: read the payload with jq, refuse rm -rf with exit 2.
JQ_VALIDATOR = """#!/bin/bash
COMMAND=$(jq -r '.tool_input.command')
if echo "$COMMAND" | grep -q 'rm -rf'; then
  echo "Blocked: rm -rf is not allowed here" >&2
  exit 2
fi
exit 0
"""

# A hook that records its payload (one JSON file per call) and exits 0.
RECORDER = """import json, os, sys, uuid
payload = json.load(sys.stdin)
folder = sys.argv[1]
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, payload["hook_event_name"] + "-" + uuid.uuid4().hex + ".json"), "w") as fh:
    json.dump(payload, fh)
"""


def _script(folder: Path, name: str, text: str, mode: int = 0o755) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


def _home(tmp_path: Path, claude: dict[str, Any] | None = None, codex: dict[str, Any] | None = None) -> Path:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    if claude is not None:
        (home / "hooks" / "claude.json").write_text(json.dumps(claude))
    if codex is not None:
        (home / "hooks" / "codex.json").write_text(json.dumps(codex))
    return home


def _hook(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **extra}


def _recorder(tmp_path: Path, folder: Path) -> str:
    script = _script(tmp_path, "recorder.py", RECORDER)
    return f"{PY} {shlex.quote(str(script))} {shlex.quote(str(folder))}"


def _payloads(folder: Path, event: str | None = None) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []
    return [p for p in found if event is None or p["hook_event_name"] == event]


def _events(home: Path, session_id: str) -> list[dict[str, Any]]:
    shown = dsh("sessions", "show", session_id, "--json", home=home)
    assert shown.returncode == 0, shown.stderr
    events: list[dict[str, Any]] = json.loads(shown.stdout)["events"]
    return events


def _run_script(tmp_path: Path, script: dict[str, Any]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return path


@pytest.mark.system_parts("jq")  # the peers' example validator reads its payload with jq
def test_jq_validator_exit_2_blocks_rm_rf_and_lets_the_rest_through(tmp_path: Path) -> None:
    validator = _script(tmp_path, "validate.sh", JQ_VALIDATOR)
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [_hook(str(validator))]}]}})
    victim = tmp_path / "victim"
    victim.mkdir()
    blocked = dsh("exec", "--", f"rm -rf {victim}", home=home)
    assert blocked.returncode == 126 and victim.exists()
    assert "Blocked: rm -rf is not allowed here" in blocked.stderr and blocked.stdout == ""
    allowed = dsh("exec", "--", "echo fine", home=home)
    assert allowed.returncode == 0 and allowed.stdout == "fine\n" and allowed.stderr == ""


def test_codex_decision_json_denies_and_updated_input_rewrites_the_call(tmp_path: Path) -> None:
    policy = _script(
        tmp_path,
        "policy.py",
        "import json, sys\n"
        "payload = json.load(sys.stdin)\n"
        "command = payload['tool_input']['command']\n"
        "out = {'hookSpecificOutput': {'hookEventName': 'PreToolUse'}}\n"
        "if 'curl' in command:\n"
        "    out['hookSpecificOutput'].update(permissionDecision='deny', permissionDecisionReason='no network')\n"
        "elif command.startswith('ls'):\n"
        "    out['hookSpecificOutput'].update(permissionDecision='allow', updatedInput={'command': 'echo rewritten'})\n"
        "print(json.dumps(out))\n",
    )
    home = _home(
        tmp_path,
        codex={"hooks": {"PreToolUse": [{"matcher": "^Bash$", "hooks": [_hook(f"{PY} {policy}", timeout=30)]}]}},
    )
    denied = dsh("exec", "--", "curl https://example.invalid", home=home)
    assert denied.returncode == 126 and "no network" in denied.stderr
    rewritten = dsh("exec", "--json", "--", "ls /", home=home)
    out = json.loads(rewritten.stdout)
    assert rewritten.returncode == 0 and out["stdout"] == "rewritten\n"
    events = _events(home, out["session_id"])
    (call,) = [e["data"] for e in events if e["type"] == "tool/call"]
    (updated,) = [e["data"] for e in events if e["type"] == "tool/input_updated"]
    assert call["arguments"] == {"command": "ls /"}
    assert updated["original"] == {"command": "ls /"} and updated["arguments"] == {"command": "echo rewritten"}
    assert updated["call_id"] == call["call_id"]
    shown = dsh("sessions", "show", out["session_id"], home=home).stdout
    assert "rewritten by a PreToolUse hook: $ echo rewritten" in shown, shown


def test_ask_without_an_approver_is_a_denial_unless_configured(tmp_path: Path) -> None:
    asker = _hook(
        'echo \'{"hookSpecificOutput": {"hookEventName": "PreToolUse", '
        '"permissionDecision": "ask", "permissionDecisionReason": "touches prod"}}\''
    )
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": [{"hooks": [asker]}]}})
    denied = dsh("exec", "--", "echo ran", home=home)
    assert denied.returncode == 126 and denied.stdout == ""
    assert "touches prod" in denied.stderr and "no one can approve" in denied.stderr
    deployment = tmp_path / "allow.yaml"
    deployment.write_text(
        "plugins:\n"
        "  - {id: bash-local, name: bash-local}\n"
        "  - {id: bash-env, name: bash-env}\n"
        "  - {id: tool-bash, name: tool-bash}\n"
        f"  - {{id: hooks, name: hooks, config: {{claude: {home / 'hooks' / 'claude.json'}, ask: allow}}}}\n"
    )
    allowed = dsh("exec", "--deployment", str(deployment), "--", "echo ran", home=home)
    assert allowed.returncode == 0 and allowed.stdout == "ran\n", allowed.stderr


def test_args_form_runs_without_a_shell(tmp_path: Path) -> None:
    probe = _script(
        tmp_path,
        "probe.py",
        "import json, sys\n"
        "json.load(sys.stdin)\n"
        "open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))\n"
        "if sys.argv[2] == '--strict':\n"
        "    print('strict mode refuses everything', file=sys.stderr)\n"
        "    sys.exit(2)\n",
    )
    seen = tmp_path / "argv.json"
    tricky = "$HOME; touch pwned"
    hook = _hook(sys.executable, args=[str(probe), str(seen), "--strict", tricky])
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}})
    proc = dsh("exec", "--", "echo should-not-run", home=home, cwd=tmp_path)
    assert proc.returncode == 126 and "strict mode refuses everything" in proc.stderr
    assert json.loads(seen.read_text()) == ["--strict", tricky]
    assert not (tmp_path / "pwned").exists()


def test_if_rule_limits_a_hook_to_matching_commands(tmp_path: Path) -> None:
    blocker = _hook("cat >/dev/null; echo 'no git here' >&2; exit 2", **{"if": "Bash(git *)"})
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [blocker]}]}})
    assert dsh("exec", "--", "echo untouched", home=home).returncode == 0
    for command in ("git --version", "cd / && git status", "FOO=1 git log"):
        proc = dsh("exec", "--", command, home=home)
        assert proc.returncode == 126 and "no git here" in proc.stderr, command
    assert dsh("exec", "--", "echo gitlike", home=home).returncode == 0


def test_an_async_hook_never_blocks_nor_delays_the_command_and_outlives_it(tmp_path: Path) -> None:
    ran, release, marker = tmp_path / "ran", tmp_path / "release", tmp_path / "marker"
    # The hook holds until the test releases it, which it does only once dsh exec has returned.
    slow = _hook(
        f"cat >/dev/null; for i in $(seq 900); do [ -e {release} ] && break; sleep 0.1; done; "
        f"if [ -e {ran} ]; then echo after > {marker}; else echo before > {marker}; fi; "
        "echo 'async hooks cannot block' >&2; exit 2",
        **{"async": True},
    )
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [slow]}]}})
    proc = dsh("exec", "--", f"touch {ran}; echo done", home=home, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "done\n", proc.stderr
    assert not marker.exists(), "the async hook ended before it was released"
    release.touch()
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.read_text() == "after\n", "the detached hook did not run on after dsh exec returned"
    (folder,) = (home / "run" / "async-hooks").iterdir()  # its output and status are kept
    while not (folder / "status").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (folder / "status").read_text() == "2\n"
    assert (folder / "stderr").read_text() == "async hooks cannot block\n"


def test_session_start_env_file_reaches_later_bash_calls_but_never_a_managed_key(tmp_path: Path) -> None:
    setup = _script(
        tmp_path,
        "setup.sh",
        "#!/bin/bash\n"
        "cat >/dev/null\n"
        'if [ -n "$CLAUDE_ENV_FILE" ]; then\n'
        "  echo 'export PROJECT_FLAVOR=mint' >> \"$CLAUDE_ENV_FILE\"\n"
        '  echo \'export PATH="/opt/flavor/bin:$PATH"\' >> "$CLAUDE_ENV_FILE"\n'
        "  echo 'export DSH_SESSION_ID=forged' >> \"$CLAUDE_ENV_FILE\"\n"
        "fi\n"
        "exit 0\n",
    )
    home = _home(tmp_path, claude={"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [_hook(str(setup))]}]}})
    proc = dsh("exec", "--json", "--", 'echo "$PROJECT_FLAVOR|$DSH_SESSION_ID|${PATH%%:*}"', home=home)
    out = json.loads(proc.stdout)
    assert out["stdout"] == f"mint|{out['session_id']}|/opt/flavor/bin\n"
    assert "env file export DSH_SESSION_ID ignored" in proc.stderr
    script = _run_script(
        tmp_path,
        {
            "turns": [
                {
                    "user": "go",
                    "steps": [
                        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo first $PROJECT_FLAVOR"}}]},
                        {"tool_calls": [{"name": "spawn_agent", "arguments": {"agent_type": "h", "prompt": "x"}}]},
                    ],
                }
            ],
            "subagents": {
                "h": [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo child $PROJECT_FLAVOR"}}]}]
            },
        },
    )
    run = dsh("run", "--script", str(script), "--json", home=home)
    main = json.loads(run.stdout)["session_id"]
    calls = [c["output"] for t in json.loads(run.stdout)["turns"] for c in t["tool_calls"]]
    assert calls[0].startswith("first mint")
    listed = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    (child,) = [s["id"] for s in listed if s["parent_session"] == main]
    outputs = [e["data"]["output"] for e in _events(home, child) if e["type"] == "tool/result"]
    assert outputs[0].startswith("child mint"), "a subagent shares its session's exports, as the peer's do"


def test_context_from_session_start_and_prompt_hooks_reaches_the_transcript_before_the_model(tmp_path: Path) -> None:
    context_json = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "ticket ABC-1 is open"}}
    )
    home = _home(
        tmp_path,
        claude={
            "hooks": {
                "SessionStart": [{"hooks": [_hook("cat >/dev/null; echo 'This project indents with tabs.'")]}],
                "UserPromptSubmit": [{"hooks": [_hook(f"cat >/dev/null; echo {shlex.quote(context_json)}")]}],
            }
        },
    )
    script = _run_script(tmp_path, {"turns": [{"user": "hello", "steps": [{"text": "hi"}]}]})
    proc = dsh("run", "--script", str(script), "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    events = _events(home, json.loads(proc.stdout)["session_id"])
    kinds = [(e["type"], e["data"].get("text")) for e in events if e["type"].startswith("message/")]
    assert kinds == [
        ("message/context", "This project indents with tabs."),
        ("message/user", "hello"),
        ("message/context", "ticket ABC-1 is open"),
        ("message/assistant", "hi"),
    ]


def test_system_message_goes_to_the_user_and_the_output_stays_the_commands(tmp_path: Path) -> None:
    note = _hook('cat >/dev/null; echo \'{"systemMessage": "remember to push"}\'')
    home = _home(tmp_path, claude={"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [note]}]}})
    proc = dsh("exec", "--json", "--", "echo out", home=home)
    assert json.loads(proc.stdout)["stdout"] == "out\n"
    assert "dsh: hook: remember to push" in proc.stderr.splitlines()
    plain = dsh("exec", "--", "echo out", home=home)
    assert plain.stdout == "out\n" and "dsh: hook: remember to push" in plain.stderr
    script = _run_script(
        tmp_path,
        {"turns": [{"user": "go", "steps": [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}]}]},
    )
    run = dsh("run", "--script", str(script), home=home)
    assert "[hook] remember to push" in run.stdout.splitlines()
    events = _events(home, json.loads(proc.stdout)["session_id"])
    reports = [r for e in events if e["type"] == "hook/result" for r in e["data"]["reports"]]
    assert [r.get("system_message") for r in reports] == ["remember to push"]


def test_continue_false_ends_the_turn_with_the_stop_reason(tmp_path: Path) -> None:
    stopper = _hook('cat >/dev/null; echo \'{"continue": false, "stopReason": "budget exhausted"}\'')
    home = _home(tmp_path, claude={"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [stopper]}]}})
    script = _run_script(
        tmp_path,
        {
            "turns": [
                {
                    "user": "go",
                    "steps": [
                        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo one"}}]},
                        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo two"}}]},
                        {"text": "never said"},
                    ],
                },
                {"user": "later", "steps": [{"text": "never either"}]},
            ]
        },
    )
    proc = dsh("run", "--script", str(script), home=home)
    assert proc.returncode == 0, proc.stderr
    assert "[turn stopped by a hook: budget exhausted]" in proc.stdout
    assert "two" not in proc.stdout and "never" not in proc.stdout


def test_unknown_handler_types_and_fields_warn_and_the_rest_run(tmp_path: Path) -> None:
    folder = tmp_path / "rec"
    settings = {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Bash",
                    "hooks": [
                        {"type": "http", "url": "http://localhost:1/hook"},
                        {"type": "prompt", "prompt": "Is this safe? $ARGUMENTS"},
                        {"type": "agent", "prompt": "Check the tests"},
                        {"type": "mcp_tool", "server": "s", "tool": "t"},
                        _hook(_recorder(tmp_path, folder), colour="blue"),
                    ],
                }
            ]
        }
    }
    home = _home(tmp_path, claude=settings)
    proc = dsh("exec", "--", "echo still works", home=home)
    assert proc.returncode == 0 and proc.stdout == "still works\n"
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("dsh: warning:")]
    path = home / "hooks" / "claude.json"
    for kind in ("http", "prompt", "agent", "mcp_tool"):
        assert [w for w in warnings if str(path) in w and "'PreToolUse'" in w and f"type '{kind}'" in w], kind
    assert [w for w in warnings if "unknown hook field(s) colour" in w]
    assert len(warnings) == 5
    assert len(_payloads(folder, "PreToolUse")) == 1


def test_disable_all_hooks_turns_every_hook_off(tmp_path: Path) -> None:
    blocker = _hook("cat >/dev/null; echo nope >&2; exit 2")
    home = _home(tmp_path, claude={"disableAllHooks": True, "hooks": {"PreToolUse": [{"hooks": [blocker]}]}})
    proc = dsh("exec", "--", "echo free", home=home)
    assert proc.returncode == 0 and proc.stdout == "free\n"


def test_identical_claude_commands_run_once_codex_runs_each(tmp_path: Path) -> None:
    log = tmp_path / "log"
    line = _hook(f"cat >/dev/null; echo hit >> {log}")
    groups = [{"matcher": "Bash", "hooks": [line]}, {"matcher": "*", "hooks": [line]}]
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": groups}})
    dsh("exec", "--", "true", home=home)
    assert log.read_text() == "hit\n"
    log.unlink()
    (home / "hooks" / "claude.json").unlink()
    (home / "hooks" / "codex.json").write_text(json.dumps({"hooks": {"PreToolUse": groups}}))
    dsh("exec", "--", "true", home=home)
    assert log.read_text() == "hit\nhit\n"


def test_matchers_are_unanchored_per_dialect(tmp_path: Path) -> None:
    claude_log, codex_log = tmp_path / "claude", tmp_path / "codex"

    def groups(log: Path) -> list[dict[str, Any]]:
        return [
            {"matcher": matcher, "hooks": [_hook(f"cat >/dev/null; echo {tag} >> {log}")]}
            for matcher, tag in (("^Ba", "prefix"), ("Bas", "bare"), ("[", "invalid"), ("Write|Edit", "other"))
        ]

    home = _home(
        tmp_path,
        claude={"hooks": {"PreToolUse": groups(claude_log)}},
        codex={"hooks": {"PreToolUse": groups(codex_log)}},
    )
    proc = dsh("exec", "--", "true", home=home)
    assert proc.returncode == 0
    # Claude Code: letters only is an exact name ("Bas" is not "Bash"); Codex: every matcher is a regex.
    assert sorted(claude_log.read_text().split()) == ["prefix"]
    assert sorted(codex_log.read_text().split()) == ["bare", "prefix"]
    assert len([w for w in proc.stderr.splitlines() if "invalid matcher '['" in w]) == 2


def test_failing_hooks_print_one_warning_line_and_the_command_still_runs(tmp_path: Path) -> None:
    not_executable = _script(tmp_path, "noexec.sh", "#!/bin/sh\nexit 2\n", mode=0o644)
    hooks = [
        _hook("cat >/dev/null; echo boom >&2; exit 1"),
        _hook("cat >/dev/null; sleep 5", timeout=0.5),
    ]
    # A hook that could not even start decides nothing after the call; before it, it refuses (below).
    after = [{"matcher": "Bash", "hooks": [_hook(str(not_executable))]}]
    home = _home(
        tmp_path, claude={"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": hooks}], "PostToolUse": after}}
    )
    proc = dsh("exec", "--", "echo survived", home=home)
    assert proc.returncode == 0 and proc.stdout == "survived\n"
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("dsh: warning:")]
    assert len(warnings) == 3, proc.stderr
    assert any("noexec.sh" in w and "status 126" in w for w in warnings)
    assert any("exited with status 1: boom" in w for w in warnings)
    assert any("timed out after 0.5 s" in w for w in warnings)
    script = _run_script(
        tmp_path,
        {"turns": [{"user": "go", "steps": [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo ok"}}]}]}]},
    )
    run = dsh("run", "--script", str(script), home=home)
    assert run.returncode == 0 and "ok" in run.stdout
    assert len([line for line in run.stderr.splitlines() if line.startswith("dsh: warning:")]) == 3
    assert "warning" not in run.stdout


def test_a_guard_that_could_not_start_refuses_the_call(tmp_path: Path) -> None:
    not_executable = _script(tmp_path, "noexec.sh", "#!/bin/sh\nexit 0\n", mode=0o644)
    guards = [_hook(str(not_executable)), _hook("python-that-is-not-installed guard.py"), _hook("cat >/dev/null")]
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": guards}]}})
    proc = dsh("exec", "--", "echo ran", home=home)
    assert proc.returncode == 126 and "ran" not in proc.stdout, proc
    assert "noexec.sh could not start" in proc.stderr and "python-that-is-not-installed" in proc.stderr


def test_post_tool_use_failure_session_end_once_and_bash_timeout_in_milliseconds(tmp_path: Path) -> None:
    folder = tmp_path / "rec"
    record = _hook(_recorder(tmp_path, folder))
    once = _hook(_recorder(tmp_path, tmp_path / "once"), once=True)
    home = _home(
        tmp_path,
        claude={
            "hooks": {
                event: [{"hooks": [record]}]
                for event in ("PreToolUse", "PostToolUse", "PostToolUseFailure", "SessionEnd", "Stop")
            }
            | {"UserPromptSubmit": [{"hooks": [once]}]}
        },
    )
    proc = dsh("exec", "--timeout", "3", "--", "exit 3", home=home)
    assert proc.returncode == 3
    (pre,) = _payloads(folder, "PreToolUse")
    assert pre["tool_input"] == {"command": "exit 3", "timeout": 3000}
    (failure,) = _payloads(folder, "PostToolUseFailure")
    assert failure["tool_use_id"] == pre["tool_use_id"] and "exit code: 3" in failure["error"]
    assert _payloads(folder, "PostToolUse") == []
    (end,) = _payloads(folder, "SessionEnd")
    assert end["reason"] == "other" and end["session_id"] == pre["session_id"]
    assert _payloads(folder, "Stop") == [], "dsh exec is a tool turn: no model, no Stop"
    script = _run_script(tmp_path, {"turns": [{"user": "one", "steps": []}, {"user": "two", "steps": []}]})
    run = dsh("run", "--script", str(script), home=home)
    assert run.returncode == 0, run.stderr
    assert [p["prompt"] for p in _payloads(tmp_path / "once")] == ["one"]
    assert len(_payloads(folder, "Stop")) == 2 and len(_payloads(folder, "SessionEnd")) == 2


def test_codex_session_start_env_file(tmp_path: Path) -> None:
    setup = _hook("cat >/dev/null; echo 'export FROM_CODEX=yes' >> \"$CODEX_ENV_FILE\"")
    home = _home(tmp_path, codex={"hooks": {"SessionStart": [{"matcher": "startup|resume", "hooks": [setup]}]}})
    proc = dsh("exec", "--", "echo $FROM_CODEX", home=home)
    assert proc.stdout == "yes\n", proc.stderr


def test_served_exec_shows_hook_messages_and_failures_too(tmp_path: Path) -> None:
    from tests.integration.test_serve import Server

    hooks = [
        _hook('cat >/dev/null; echo \'{"systemMessage": "served note"}\''),
        _hook("cat >/dev/null; exit 1"),
        {"type": "http", "url": "http://localhost:1/hook"},
    ]
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": [{"hooks": hooks}]}})
    server = Server(home)
    try:
        proc = dsh("exec", "--", "echo via server", home=home)
    finally:
        served = server.stop()
    assert "dsh serve: exec in session" in served, "the exec ran in-process, not through the server"
    assert proc.returncode == 0 and proc.stdout == "via server\n"
    lines = proc.stderr.splitlines()
    assert "dsh: hook: served note" in lines
    assert len([line for line in lines if line.startswith("dsh: warning:") and "exited with status 1" in line]) == 1
    assert len([line for line in lines if line.startswith("dsh: warning:") and "type 'http'" in line]) == 1


def test_session_start_continue_false_means_the_command_never_runs(tmp_path: Path) -> None:
    gate = _hook('cat >/dev/null; echo \'{"continue": false, "stopReason": "repository is frozen"}\'')
    home = _home(tmp_path, codex={"hooks": {"SessionStart": [{"hooks": [gate]}]}})
    proc = dsh("exec", "--", f"touch {tmp_path / 'ran'}", home=home)
    assert proc.returncode == 126 and "repository is frozen" in proc.stderr
    assert not (tmp_path / "ran").exists()


def test_session_start_env_files_live_in_the_private_home_and_others_cannot_plant_one(tmp_path: Path) -> None:
    where = tmp_path / "where.txt"
    setup = _script(
        tmp_path,
        "setup.sh",
        "#!/bin/bash\n"
        "cat >/dev/null\n"
        f'echo "$CLAUDE_ENV_FILE" > {where}\n'
        "echo 'export PROJECT_FLAVOR=mint' >> \"$CLAUDE_ENV_FILE\"\n"
        # A file others can write is never sourced: make this one so, as a planted one would be.
        'chmod 666 "$CLAUDE_ENV_FILE"\n',
    )
    home = _home(tmp_path, claude={"hooks": {"SessionStart": [{"hooks": [_hook(str(setup))]}]}})
    proc = dsh("exec", "--", 'echo "flavor=${PROJECT_FLAVOR-none}"', home=home)
    env_file = Path(where.read_text().strip())
    assert env_file.is_relative_to(home / "run"), env_file
    assert proc.stdout == "flavor=none\n"
    assert f"refusing hook env file {env_file}: it is writable by group or others" in proc.stderr
