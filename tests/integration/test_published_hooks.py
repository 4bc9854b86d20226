"""Published-style hooks and Claude Code plugins, unchanged, through the real ``dsh`` (issue 23).

The scripts are the project's own corpus (``hook_corpus/``), written as the peers' guides write
hooks; each test lays them out where a project or plugin keeps them and runs ``dsh exec`` / ``dsh run``.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import PEER_SCHEMAS
from tests.helpers import dsh

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).with_name("hook_corpus")
CLAUDE_KEYS = json.loads((PEER_SCHEMAS / "claude" / "ts_hook_keys.json").read_text())["types"]


def _home(tmp_path: Path, claude: dict[str, Any] | None = None, codex: dict[str, Any] | None = None) -> Path:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True, exist_ok=True)
    for name, table in (("claude", claude), ("codex", codex)):
        if table is not None:
            (home / "hooks" / f"{name}.json").write_text(json.dumps(table))
    return home


def _project(tmp_path: Path, *scripts: str) -> Path:
    """A project folder keeping corpus scripts under ``.claude/hooks/``, as the guides lay them out."""
    project = tmp_path / "project"
    hooks = project / ".claude" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    for name in scripts:
        shutil.copy(CORPUS / name, hooks / name)
        (hooks / name).chmod(0o755)
    (project / "build").mkdir(exist_ok=True)
    return project


def _pre_tool(*hooks: dict[str, Any], matcher: str = "Bash") -> dict[str, Any]:
    return {"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": list(hooks)}]}}


@pytest.mark.parametrize(
    "hook",
    [
        {"type": "command", "command": "${CLAUDE_PROJECT_DIR}/.claude/hooks/guard.sh", "args": []},
        {"type": "command", "command": '"${CLAUDE_PROJECT_DIR}"/.claude/hooks/guard.sh'},
        {"type": "command", "command": '"$CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh"'},
    ],
    ids=["exec-form", "shell-form-braces", "shell-form"],
)
def test_a_guard_referenced_through_the_project_dir_refuses(tmp_path: Path, hook: dict[str, Any]) -> None:
    project = _project(tmp_path, "guard.sh")
    home = _home(tmp_path, claude=_pre_tool(hook))
    proc = dsh("exec", "--cwd", str(project), "--", "rm -rf build", home=home)
    assert proc.returncode == 126, proc.stderr
    assert "Blocked by guard.sh" in proc.stderr and (project / "build").is_dir()
    allowed = dsh("exec", "--cwd", str(project), "--", "echo fine", home=home)
    assert allowed.returncode == 0 and allowed.stdout == "fine\n", allowed.stderr


def test_hooks_get_the_peers_session_variables_and_tool_input_placeholders(tmp_path: Path) -> None:
    project = _project(tmp_path, "env_report.sh")
    script = project / ".claude" / "hooks" / "env_report.sh"
    claude_out, codex_out, arg_out = tmp_path / "claude.json", tmp_path / "codex.json", tmp_path / "arg.txt"
    exec_form = {
        "type": "command",
        "command": "/bin/sh",
        "args": ["-c", 'cat >/dev/null; printf "%s" "$1" > "$2"', "sh", "${tool_input.command}", str(arg_out)],
    }
    home = _home(
        tmp_path,
        claude=_pre_tool({"type": "command", "command": f"{script} {claude_out}"}, exec_form),
        codex=_pre_tool({"type": "command", "command": f"{script} {codex_out}"}),
    )
    proc = dsh("exec", "--cwd", str(project), "--json", "--", "echo 'a b'", home=home)
    assert proc.returncode == 0, proc.stderr
    session = json.loads(proc.stdout)["session_id"]
    claude, codex = json.loads(claude_out.read_text()), json.loads(codex_out.read_text())
    assert claude["CLAUDE_PROJECT_DIR"] == str(project) and claude["CLAUDE_CODE_SESSION_ID"] == session
    assert claude["payload"]["session_id"] == session and claude["CODEX_THREAD_ID"] == ""
    assert codex["CODEX_THREAD_ID"] == session and codex["CLAUDE_CODE_SESSION_ID"] == ""
    assert arg_out.read_text() == "echo 'a b'"  # one argument, never re-read by a shell


def _plugin(tmp_path: Path, name: str = "plugin-guard") -> Path:
    folder = tmp_path / "plugins" / name
    shutil.copytree(CORPUS / name, folder)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or path.suffix == ".sh" else 0o644)
    return folder


def _deployment(tmp_path: Path, plugin: Path, **config: Any) -> Path:
    path = tmp_path / "deployment.yaml"
    hooks = {"id": "hooks", "name": "hooks", "config": {"claude_plugins": [str(plugin)], **config}}
    path.write_text(json.dumps({"plugins": [hooks]}))  # JSON is YAML
    return path


def test_a_claude_code_plugin_folder_loads_by_path_with_its_root_and_data(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    home = _home(tmp_path)
    deployment = _deployment(tmp_path, plugin)
    (tmp_path / "build").mkdir()
    proc = dsh("exec", "--deployment", str(deployment), "--cwd", str(tmp_path), "--", "rm -rf build", home=home)
    assert proc.returncode == 126 and "Blocked by guard.sh" in proc.stderr, proc.stderr
    assert (tmp_path / "build").is_dir()
    again = dsh("exec", "--deployment", str(deployment), "--", "echo ok", home=home)
    assert again.returncode == 0 and again.stdout == "ok\n", again.stderr
    data = home / "plugins" / "data" / "plugin-guard"
    assert (data / "sessions").read_text() == "2\n"  # kept across runs
    assert data.stat().st_mode & 0o777 == 0o700


def test_a_plugin_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    plugin.chmod(0o777)
    proc = dsh("exec", "--deployment", str(_deployment(tmp_path, plugin)), "--", "echo ran", home=_home(tmp_path))
    assert proc.returncode == 125 and "ran" not in proc.stdout
    assert str(plugin) in proc.stderr and "writable by group or others" in proc.stderr


def test_a_plugin_folders_skills_reach_the_model(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    home = _home(tmp_path)
    deployment = _deployment(tmp_path, plugin)
    listed = dsh("skills", "--deployment", str(deployment), "--json", home=home)
    assert listed.returncode == 0, listed.stderr
    (skill,) = json.loads(listed.stdout)["skills"]
    assert skill["name"] == "safe-cleanup" and skill["source"] == "claude-plugin:plugin-guard"
    assert skill["path"] == str(plugin / "skills" / "safe-cleanup" / "SKILL.md")
    script = tmp_path / "script.json"
    call = {"tool_calls": [{"name": "skill", "arguments": {"name": "safe-cleanup"}}]}
    script.write_text(json.dumps({"turns": [{"user": "clean up", "steps": [call, {"text": "ok"}]}]}))
    run = dsh("run", "--script", str(script), "--deployment", str(deployment), "--json", home=home)
    assert run.returncode == 0, run.stderr
    (result,) = json.loads(run.stdout)["turns"][0]["tool_calls"]
    assert "remove the files by name" in result["output"] and str(plugin / "skills") in result["output"]


def test_a_plugin_skills_folder_others_can_write_fails_the_boot(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    (plugin / "skills").chmod(0o777)
    proc = dsh("skills", "--deployment", str(_deployment(tmp_path, plugin)), home=_home(tmp_path))
    assert proc.returncode == 1 and "safe-cleanup" not in proc.stdout
    assert str(plugin / "skills") in proc.stderr and "writable by group or others" in proc.stderr


def test_without_the_skills_plugin_a_plugin_folder_still_loads_its_hooks(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    deployment = tmp_path / "deployment.yaml"
    hooks = {"id": "hooks", "name": "hooks", "config": {"claude_plugins": [str(plugin)]}}
    deployment.write_text(json.dumps({"plugins": [{"id": "skills", "enabled": False}, hooks]}))
    (tmp_path / "build").mkdir()
    proc = dsh(
        "exec", "--deployment", str(deployment), "--cwd", str(tmp_path), "--", "rm -rf build", home=_home(tmp_path)
    )
    assert proc.returncode == 126 and "Blocked by guard.sh" in proc.stderr, proc.stderr


ASK = {
    "type": "command",
    "command": 'cat >/dev/null; echo \'{"hookSpecificOutput": {"hookEventName": "PreToolUse", '
    '"permissionDecision": "ask", "permissionDecisionReason": "deploys need a human"}}\'',
}


def _answer(behavior: str, folder: Path, **extra: Any) -> dict[str, Any]:
    decision = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": behavior, **extra}}}
    )
    return {"type": "command", "command": f"cat > {folder}/payload-$$.json; echo '{decision}'"}


@pytest.mark.parametrize("dialect", ["claude", "codex"])
def test_a_permission_request_hook_answers_a_pretooluse_ask(tmp_path: Path, dialect: str) -> None:
    def run(answer: dict[str, Any] | None, command: str = "echo deployed") -> Any:
        table: dict[str, Any] = _pre_tool(ASK)
        if answer is not None:
            table["hooks"]["PermissionRequest"] = [{"matcher": "Bash", "hooks": [answer]}]
        home = tmp_path / dialect / str(len(list(tmp_path.glob(f"{dialect}/*"))))
        (home / "hooks").mkdir(parents=True)
        (home / "hooks" / f"{dialect}.json").write_text(json.dumps(table))
        return dsh("exec", "--", command, home=home)

    allowed = run(_answer("allow", tmp_path))
    assert allowed.returncode == 0 and allowed.stdout == "deployed\n", allowed.stderr
    (payload,) = [json.loads(p.read_text()) for p in tmp_path.glob("payload-*.json")]
    for seen in tmp_path.glob("payload-*.json"):
        seen.unlink()
    assert payload["hook_event_name"] == "PermissionRequest" and payload["tool_input"] == {"command": "echo deployed"}
    if dialect == "codex":
        schema = json.loads((PEER_SCHEMAS / "codex" / "permission-request.command.input.schema.json").read_text())
        jsonschema.validate(payload, schema)
    else:
        assert set(payload) <= {
            *CLAUDE_KEYS["PermissionRequestHookInput"]["required"],
            *CLAUDE_KEYS["PermissionRequestHookInput"]["optional"],
            "hook_event_name",
        }
    denied = run(_answer("deny", tmp_path, message="not on a Friday"))
    assert denied.returncode == 126 and "not on a Friday" in denied.stderr
    unanswered = run(None)  # nobody answers: the config's ask policy (deny) holds
    assert unanswered.returncode == 126 and "deploys need a human" in unanswered.stderr
    rewritten = run(_answer("allow", tmp_path, updatedInput={"command": "echo rewritten"}))
    if dialect == "claude":
        assert rewritten.returncode == 0 and rewritten.stdout == "rewritten\n", rewritten.stderr
    else:  # Codex reserves updatedInput and fails closed on it
        assert rewritten.returncode == 126 and "fails closed" in rewritten.stderr


# Logs, at each hook it runs for, the transcript it was handed: path, inode, mode and line count.
VIEW_LOG = (
    'p=$(jq -r .transcript_path); [ -f "$p" ] || {{ echo "$p - - 0" >> {log}; exit 0; }}; '
    'printf "%s %s %s %s\\n" "$p" "$(stat -c %i "$p")" "$(stat -c %a "$p")" "$(wc -l < "$p")" >> {log}'
)


@pytest.mark.system_parts("jq")  # the loop plugin's Stop hook reads the transcript with jq
def test_a_loop_plugin_reads_the_last_assistant_message_from_a_claude_code_transcript(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, "plugin-loop")
    log = tmp_path / "view.log"
    watcher = {"type": "command", "command": VIEW_LOG.format(log=log)}
    home = _home(tmp_path, claude={"hooks": {"PreToolUse": [{"hooks": [watcher]}], "Stop": [{"hooks": [watcher]}]}})
    deployment = tmp_path / "deployment.yaml"
    hooks = {
        "id": "hooks",
        "name": "hooks",
        "config": {
            "claude": str(home / "hooks" / "claude.json"),
            "claude_plugins": [str(plugin)],
            "claude_transcript": "plugins",
        },
    }
    deployment.write_text(json.dumps({"plugins": [hooks]}))
    steps = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo one"}}]},
        {"text": "I ran it."},
        {"text": "All of it ran. <done/>"},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"user": "run the task", "steps": steps}]}))

    proc = dsh("run", "--script", str(script), "--deployment", str(deployment), "--json", home=home, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (turn,) = json.loads(proc.stdout)["turns"]
    assert turn["text"] == "All of it ran. <done/>"  # the plugin blocked the first stop, allowed the second
    session = json.loads(proc.stdout)["session_id"]
    view = home / "transcripts" / "claude-code" / f"{session}.jsonl"
    assert view.stat().st_mode & 0o777 == 0o600 and view.parent.stat().st_mode & 0o777 == 0o700
    lines = [json.loads(line) for line in view.read_text().splitlines()]
    roles = [(line["type"], line["message"]["role"]) for line in lines]
    assert roles == [
        ("user", "user"),
        ("assistant", "assistant"),
        ("user", "user"),
        ("assistant", "assistant"),
        ("user", "user"),
        ("assistant", "assistant"),
    ]
    prompt, call, result, first, steer, last = lines
    assert prompt["message"]["content"] == "run the task" and prompt["parentUuid"] is None
    assert all(b["parentUuid"] == a["uuid"] for a, b in itertools.pairwise(lines))
    assert {line["sessionId"] for line in lines} == {session} and {line["cwd"] for line in lines} == {str(tmp_path)}
    (use,) = call["message"]["content"]
    assert use["type"] == "tool_use" and use["name"] == "Bash" and use["input"] == {"command": "echo one"}
    (answer,) = result["message"]["content"]
    assert answer == {"type": "tool_result", "tool_use_id": use["id"], "content": answer["content"], "is_error": False}
    assert answer["content"].startswith("one") and result["toolUseResult"]["stdout"].startswith("one")
    assert first["message"]["content"] == [{"type": "text", "text": "I ran it."}]
    assert steer["isMeta"] is True and "<done/>" in steer["message"]["content"]
    assert last["message"]["content"] == [{"type": "text", "text": "All of it ran. <done/>"}]
    # With claude_transcript: plugins the user's own hooks got the persistence's own transcript path;
    # run again with the default, which hands the view to every Claude Code hook.
    (handed,) = {line.split()[0] for line in log.read_text().splitlines()}
    assert handed.startswith(f"{home / 'sessions'}/") and handed.endswith(".jsonl")

    log.unlink()
    del hooks["config"]["claude_transcript"]
    deployment.write_text(json.dumps({"plugins": [hooks]}))
    again = dsh(
        "run",
        "--script",
        str(script),
        "--deployment",
        str(deployment),
        "--session",
        session,
        "--json",
        home=home,
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr
    seen = [line.split() for line in log.read_text().splitlines()]
    assert len(seen) == 3  # PreToolUse, then the blocked and the allowed Stop
    assert {path for path, _, _, _ in seen} == {str(view)}
    assert {inode for _, inode, _, _ in seen} == {str(view.stat().st_ino)}  # rebuilt once, then appended to
    assert {mode for _, _, mode, _ in seen} == {"600"}
    counts = [int(count) for _, _, _, count in seen]
    assert counts == sorted(counts) and counts[0] > 6 and len(set(counts)) == 3
    assert len(view.read_text().splitlines()) == 12  # both turns, each line once


def _transcript_readers(tmp_path: Path, *, as_plugin: bool) -> tuple[Path, Path | None]:
    """The plugin-transcript Stop hooks, as a plugin folder or as the user's own hooks; the home, and
    the deployment file that loads the plugin (None: the default deployment reads the home's hooks)."""
    plugin = _plugin(tmp_path, "plugin-transcript")
    if as_plugin:
        return _home(tmp_path), _deployment(tmp_path, plugin)
    table = json.loads((plugin / "hooks" / "hooks.json").read_text().replace("${CLAUDE_PLUGIN_ROOT}", str(plugin)))
    return _home(tmp_path, claude=table), None


@pytest.mark.parametrize("as_plugin", [False, True], ids=["own-hooks", "plugin"])
def test_stop_hooks_reading_the_transcript_see_the_current_turn_as_claude_code_writes_it(
    tmp_path: Path, as_plugin: bool
) -> None:
    home, deployment = _transcript_readers(tmp_path, as_plugin=as_plugin)
    chat = tmp_path / "chat.log"
    steps = [
        {"text": "Fixed."},  # the gate refuses: no test ran yet in this (first, unflushed) turn
        {"tool_calls": [{"name": "bash", "arguments": {"command": "python3 -m pytest --version"}}]},
        {"text": "Fixed, and the tests ran."},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"user": "fix the bug", "steps": steps}]}))
    chosen = ["--deployment", str(deployment)] if deployment else []
    proc = dsh("run", "--script", str(script), *chosen, "--json", home=home, cwd=tmp_path, env={"CHAT_LOG": str(chat)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (turn,) = out["turns"]
    assert turn["text"] == "Fixed, and the tests ran." and turn["blocked"] is None, proc.stderr
    session = out["session_id"]
    (transcript,) = (home / "sessions").rglob(f"{session}.jsonl")
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    stops = [r["data"] for r in records if r.get("type") == "hook/result" and r["data"]["event"] == "Stop"]
    gates = [[rep for rep in s["reports"] if "require_tests" in rep["command"]] for s in stops]
    assert [g[0]["blocked"] for g in gates] == [True, False]  # once, before the test run; not eight times
    logged = chat.read_text().split("--- ")[1:]
    assert len(logged) == 2  # each Stop copied the conversation so far
    first, second = (block.splitlines()[1:] for block in logged)
    assert first == ["user: fix the bug", "assistant: Fixed."]
    assert second[:2] == first and second[2] == 'assistant: [Bash] {"command": "python3 -m pytest --version"}'
    assert second[3].startswith("user: [result] pytest ") and second[-1] == "assistant: Fixed, and the tests ran."
