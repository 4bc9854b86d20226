"""Gemini CLI hooks, written as Gemini CLI's hooks reference writes them, through the real ``dsh``.

Each test puts a Gemini CLI ``settings.json``-style hook object at ``$DSH_HOME/hooks/gemini.json``,
which the default deployment reads through the installed dsh-hooks-gemini, and runs ``dsh exec``,
``dsh run --script`` or ``dsh mcp`` in a child process.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import REPO
from tests.helpers import dsh

pytestmark = pytest.mark.integration

PY = shlex.quote(sys.executable)

# The reference's BeforeTool guard, in Python: read the payload, answer with JSON on stdout (exit 0),
# log to stderr only.
GUARD = """import json, sys
payload = json.load(sys.stdin)
command = payload.get("tool_input", {}).get("command", "")
print(f"checking {payload['tool_name']}", file=sys.stderr)
if "rm -rf" in command:
    print(json.dumps({"decision": "deny", "reason": "Security Policy: rm -rf is not allowed",
                      "systemMessage": "Blocked a dangerous command"}))
else:
    print(json.dumps({"decision": "allow"}))
"""

# The reference's exit-2 form: stderr is the reason.
EXIT_2 = """#!/bin/bash
input=$(cat)
if echo "$input" | grep -q 'secret'; then
  echo "Blocked: the command mentions a secret" >&2
  exit 2
fi
echo '{}'
"""

# Records its payload and environment (one JSON file per call, named to sort in the order of the calls),
# answers nothing.
RECORDER = """import json, os, sys, time
payload = json.load(sys.stdin)
env = {k: v for k, v in os.environ.items() if k.startswith(("GEMINI_", "CLAUDE_", "CODEX_"))}
folder = sys.argv[1]
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, f"{time.time_ns():020d}-{payload['hook_event_name']}.json"), "w") as fh:
    json.dump({"payload": payload, "env": env}, fh)
print("{}")
"""


def _script(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _home(tmp_path: Path, hooks: dict[str, Any]) -> Path:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True, exist_ok=True)
    (home / "hooks" / "gemini.json").write_text(json.dumps({"hooks": hooks}))
    return home


def _command(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": 30000, **extra}


def _records(folder: Path) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        found.setdefault(record["payload"]["hook_event_name"], []).append(record)
    return found


def test_a_before_tool_guard_denies_a_shell_command_by_its_gemini_name(tmp_path: Path) -> None:
    guard = _script(tmp_path, "guard.py", GUARD)
    home = _home(tmp_path, {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [_command(f"{PY} {guard}")]}]})
    blocked = dsh("exec", "--", "rm -rf build", home=home, cwd=tmp_path)
    assert blocked.returncode == 126, blocked.stderr
    assert "Security Policy: rm -rf is not allowed" in blocked.stderr
    assert "Blocked a dangerous command" in blocked.stderr  # the systemMessage, for the user
    allowed = dsh("exec", "--", "echo fine", home=home, cwd=tmp_path)
    assert allowed.returncode == 0 and allowed.stdout == "fine\n", allowed.stderr


def test_exit_2_blocks_with_stderr_as_the_reason_and_a_regex_matcher_applies(tmp_path: Path) -> None:
    hook = _script(tmp_path, "exit2.sh", EXIT_2)
    home = _home(tmp_path, {"BeforeTool": [{"matcher": "run_shell.*", "hooks": [_command(str(hook))]}]})
    blocked = dsh("exec", "--", "echo secret", home=home, cwd=tmp_path)
    assert blocked.returncode == 126 and "Blocked: the command mentions a secret" in blocked.stderr
    other = _home(tmp_path, {"BeforeTool": [{"matcher": "read_file", "hooks": [_command(str(hook))]}]})
    assert dsh("exec", "--", "echo secret", home=other, cwd=tmp_path).returncode == 0


def test_hooks_get_gemini_cli_payloads_and_variables_and_children_none_of_the_outer_ones(tmp_path: Path) -> None:
    recorder = _script(tmp_path, "recorder.py", RECORDER)
    log = tmp_path / "log"
    record = [_command(f"{PY} {recorder} {log}")]
    home = _home(
        tmp_path,
        {event: [{"hooks": record}] for event in ("SessionStart", "BeforeTool", "AfterTool", "SessionEnd")},
    )
    outer = {"GEMINI_SESSION_ID": "outer", "GEMINI_PROJECT_DIR": "/outer", "GEMINI_CWD": "/outer"}
    proc = dsh("exec", "--json", "--", 'echo "child=${GEMINI_SESSION_ID-unset}"', home=home, cwd=tmp_path, env=outer)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["stdout"] == "child=unset\n"  # the outer Gemini CLI's identity never reaches the child
    session = result["session_id"]
    seen = _records(log)
    assert sorted(seen) == ["AfterTool", "BeforeTool", "SessionEnd", "SessionStart"]
    for (record,) in seen.values():
        payload, env = record["payload"], record["env"]
        assert payload["session_id"] == session and payload["cwd"] == str(tmp_path)
        assert isinstance(payload["transcript_path"], str) and payload["timestamp"].endswith("Z")
        assert env["GEMINI_SESSION_ID"] == session
        assert env["GEMINI_PROJECT_DIR"] == env["CLAUDE_PROJECT_DIR"] == env["GEMINI_CWD"] == str(tmp_path)
    before = seen["BeforeTool"][0]["payload"]
    assert before["tool_name"] == "run_shell_command"
    assert before["tool_input"]["command"] == 'echo "child=${GEMINI_SESSION_ID-unset}"'
    assert set(before) == {"session_id", "transcript_path", "cwd", "hook_event_name", "timestamp"} | {
        "tool_name",
        "tool_input",
    }
    after = seen["AfterTool"][0]["payload"]
    # What the model read of the call (Gemini's llmContent), and what the user saw.
    assert after["tool_response"]["llmContent"].startswith("child=unset\n")
    assert after["tool_response"]["returnDisplay"] == after["tool_response"]["llmContent"]
    assert seen["SessionStart"][0]["payload"]["source"] == "startup"


def test_without_a_gemini_hooks_file_the_outer_gemini_identity_still_never_reaches_a_child(tmp_path: Path) -> None:
    home = tmp_path / "home"
    outer = {"GEMINI_SESSION_ID": "outer", "CLAUDE_CODE_SESSION_ID": "outer", "CODEX_THREAD_ID": "outer"}
    line = 'echo "${GEMINI_SESSION_ID-unset} ${CLAUDE_CODE_SESSION_ID-unset} ${CODEX_THREAD_ID-unset}"'
    proc = dsh("exec", "--", line, home=home, cwd=tmp_path, env=outer)
    assert proc.returncode == 0 and proc.stdout == "unset unset unset\n", proc.stderr


def test_a_scripted_run_fires_every_gemini_event_and_after_agent_sends_the_agent_on(tmp_path: Path) -> None:
    recorder = _script(tmp_path, "recorder.py", RECORDER)
    log = tmp_path / "log"
    record = [_command(f"{PY} {recorder} {log}")]
    # AfterAgent rejects an answer without the word "verified" (the reference's retry), once.
    retry = _script(
        tmp_path,
        "retry.py",
        "import json, sys\np = json.load(sys.stdin)\n"
        "if 'verified' not in p['prompt_response']:\n"
        "    print(json.dumps({'decision': 'deny', 'reason': 'Say whether you verified it.'}))\n"
        "else:\n    print('{}')\n",
    )
    context = _script(
        tmp_path,
        "context.py",
        "import json, sys\njson.load(sys.stdin)\n"
        "out = {'hookSpecificOutput': {'hookEventName': 'BeforeAgent', 'additionalContext': 'On main.'}}\n"
        "print(json.dumps(out))\n",
    )
    events = ("SessionStart", "BeforeModel", "AfterModel", "BeforeTool", "AfterTool", "SessionEnd")
    hooks: dict[str, Any] = {event: [{"hooks": record}] for event in events}
    hooks["BeforeAgent"] = [{"hooks": [*record, _command(f"{PY} {context}")]}]
    hooks["AfterAgent"] = [{"hooks": [*record, _command(f"{PY} {retry}")]}]
    home = _home(tmp_path, hooks)
    steps = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo ran"}}]},
        {"text": "Done."},
        {"text": "Done, and verified."},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"user": "run the check", "steps": steps}]}))
    proc = dsh("run", "--script", str(script), "--json", home=home, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (turn,) = out["turns"]
    assert turn["text"] == "Done, and verified."  # AfterAgent denied the first answer, allowed the second
    seen = _records(log)
    assert set(seen) == {"SessionStart", "SessionEnd", "BeforeAgent", "AfterAgent"} | {
        "BeforeModel",
        "AfterModel",
        "BeforeTool",
        "AfterTool",
    }
    assert seen["BeforeAgent"][0]["payload"]["prompt"] == "run the check"
    assert len(seen["BeforeModel"]) == len(seen["AfterModel"]) == 3  # one per model step
    first_request = seen["BeforeModel"][0]["payload"]["llm_request"]
    assert first_request["messages"][0] == {"role": "user", "content": "run the check"}
    assert {"role": "user", "content": "On main."} in first_request["messages"]  # the BeforeAgent context
    answers = [r["payload"]["llm_response"]["candidates"][0]["content"]["parts"] for r in seen["AfterModel"]]
    assert answers == [[], ["Done."], ["Done, and verified."]]
    stops = [r["payload"] for r in seen["AfterAgent"]]
    assert [s["prompt_response"] for s in stops] == ["Done.", "Done, and verified."]
    assert [s["stop_hook_active"] for s in stops] == [False, True]
    assert {s["prompt"] for s in stops} == {"run the check"}


def test_a_before_model_deny_ends_the_turn_before_the_model_is_asked(tmp_path: Path) -> None:
    deny = _script(tmp_path, "deny.sh", "#!/bin/bash\ncat > /dev/null\necho 'quota reached' >&2\nexit 2\n")
    home = _home(tmp_path, {"BeforeModel": [{"hooks": [_command(str(deny))]}]})
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"user": "hi", "steps": [{"text": "never said"}]}]}))
    proc = dsh("run", "--script", str(script), "--json", home=home, cwd=tmp_path)
    (turn,) = json.loads(proc.stdout)["turns"]
    assert turn["blocked"] == "quota reached" and turn["text"] != "never said", proc.stderr


async def _mcp_call(home: Path, cwd: Path, command: str) -> str:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "dsh.cli", "mcp", "--cwd", str(cwd)],
        env={"DSH_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path), "PATH": os.environ["PATH"]},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("bash", {"command": command})
        return "".join(getattr(block, "text", "") for block in result.content)


def test_a_before_tool_guard_holds_over_mcp(tmp_path: Path) -> None:
    guard = _script(tmp_path, "guard.py", GUARD)
    home = _home(tmp_path, {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [_command(f"{PY} {guard}")]}]})
    refused = asyncio.run(asyncio.wait_for(_mcp_call(home, tmp_path, "rm -rf build"), 90))
    assert "Security Policy: rm -rf is not allowed" in refused
    ran = asyncio.run(asyncio.wait_for(_mcp_call(home, tmp_path, "echo over-mcp"), 90))
    assert "over-mcp" in ran


def _venv_without_gemini(root: Path) -> Path:
    """A new venv that sees this workspace's packages except dsh-hooks-gemini (a folder of links to every
    entry of the workspace's site-packages but that distribution's), so pip alone decides whether it is there."""
    venv.EnvBuilder(with_pip=True).create(root)
    python = root / "bin" / "python"
    site = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    mirror = root / "workspace-site"
    mirror.mkdir()
    workspace = Path(sysconfig.get_paths()["purelib"])
    for entry in workspace.iterdir():
        if "dsh_hooks_gemini" not in entry.name:
            (mirror / entry.name).symlink_to(entry)
    # addsitedir also runs the editable-install .pth files linked there.
    (Path(site) / "workspace.pth").write_text(f"import site; site.addsitedir({str(mirror)!r})\n")
    return python


def _pip(python: Path, *args: str) -> None:
    subprocess.run(
        [python, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True, capture_output=True, text=True
    )


def test_pip_uninstall_of_the_dialect_removes_it_and_its_hooks_stop_running(tmp_path: Path) -> None:
    python = _venv_without_gemini(tmp_path / "venv")
    guard = _script(tmp_path, "guard.py", GUARD)
    home = _home(tmp_path, {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [_command(f"{PY} {guard}")]}]})
    outer = {"GEMINI_SESSION_ID": "outer"}
    line = 'echo "rm -rf ${GEMINI_SESSION_ID-unset}"'
    # Not installed: gemini.json is no one's file, the command runs, and Gemini's variables are no one's.
    before = dsh("exec", "--", line, home=home, cwd=tmp_path, env=outer, python=str(python))
    assert before.returncode == 0 and before.stdout == "rm -rf outer\n", before.stderr

    _pip(python, "install", "--no-deps", "--no-build-isolation", str(REPO / "packages" / "dsh-hooks-gemini"))
    listed = dsh("plugins", home=home, python=str(python)).stdout
    assert re.search(r"^dsh\.hook_dialects +gemini +dsh-hooks-gemini 0\.1\.0 +active$", listed, re.M), listed
    blocked = dsh("exec", "--", line, home=home, cwd=tmp_path, env=outer, python=str(python))
    assert blocked.returncode == 126 and "Security Policy: rm -rf is not allowed" in blocked.stderr

    _pip(python, "uninstall", "-y", "dsh-hooks-gemini")
    assert " gemini " not in dsh("plugins", home=home, python=str(python)).stdout
    after = dsh("exec", "--", line, home=home, cwd=tmp_path, env=outer, python=str(python))
    assert after.returncode == 0 and after.stdout == "rm -rf outer\n", after.stderr  # its hooks and scrubbing gone


def test_a_deployment_names_a_dialects_hooks_by_its_name_and_an_unknown_name_is_a_warning(tmp_path: Path) -> None:
    guard = _script(tmp_path, "guard.py", GUARD)
    settings = tmp_path / "settings.json"  # a whole Gemini CLI settings.json: only its hooks object is read
    hooks = {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [_command(f"{PY} {guard}")]}]}
    settings.write_text(json.dumps({"general": {"vimMode": True}, "hooks": hooks}))
    settings.chmod(0o600)
    deployment = tmp_path / "deployment.yaml"
    config = {"dialects": {"gemini": str(settings), "cursor": {"hooks": {}}}}
    deployment.write_text(json.dumps({"plugins": [{"id": "hooks", "config": config}]}))
    home = tmp_path / "home"
    blocked = dsh("exec", "--deployment", str(deployment), "--", "rm -rf build", home=home, cwd=tmp_path)
    assert blocked.returncode == 126 and "Security Policy: rm -rf is not allowed" in blocked.stderr
    (warning,) = [line for line in blocked.stderr.splitlines() if "cursor" in line]
    assert "no hook dialect named 'cursor' is installed; its hooks do not run" in warning
    assert "dialects: claude, codex, gemini" in warning
