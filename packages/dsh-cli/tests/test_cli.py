"""The ``dsh`` command as a user runs it: a real process each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.testing import dsh

pytestmark = pytest.mark.integration


def test_exec_json_reports_identity_and_exit_code(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = dsh(
        "exec",
        "--json",
        "--",
        'echo "$DSH_SESSION_ID|$DSH_SESSION_JSONL|$DSH_HOME|$DSH_SHELL"; exit 7',
        home=home,
        cwd=tmp_path,
    )
    assert proc.returncode == 7, proc.stderr
    out = json.loads(proc.stdout)
    assert out["exit_code"] == 7
    assert out["location"]["kind"] == "jsonl"
    assert out["stdout"] == f"{out['session_id']}|{out['location']['path']}|{home}|1\n"
    lines = Path(out["location"]["path"]).read_text().splitlines()
    assert json.loads(lines[0])["header"]["id"] == out["session_id"]
    assert json.loads(lines[0])["header"]["cwd"] == str(tmp_path)
    assert any(json.loads(line)["type"] == "tool/result" for line in lines)


def test_exec_passes_output_through_and_several_words_are_argv(tmp_path: Path) -> None:
    proc = dsh("exec", "--", "printf", "%s|", "a b", "$HOME", home=tmp_path / "h")
    assert proc.returncode == 0 and proc.stdout == "a b|$HOME|"


def test_exec_resumes_a_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)
    second = json.loads(
        dsh("exec", "--json", "--session", first["session_id"], "--", "echo $DSH_SESSION_ID", home=home).stdout
    )
    assert second["session_id"] == first["session_id"] and second["stdout"].strip() == first["session_id"]
    assert second["location"] == first["location"]
    shown = json.loads(dsh("sessions", "show", first["session_id"], "--json", home=home).stdout)
    assert [e["type"] for e in shown["events"]].count("turn/start") == 2


def test_sessions_list_show_locate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)
    listed = json.loads(dsh("sessions", "list", "--json", home=home).stdout)
    assert [s["id"] for s in listed["sessions"]] == [made["session_id"]]
    located = dsh("sessions", "locate", made["session_id"], home=home)
    assert located.stdout.strip() == made["location"]["path"]
    missing = dsh("sessions", "show", "nope", home=home)
    assert missing.returncode == 1 and missing.stderr.startswith("dsh: no session nope")
    hostile = dsh("sessions", "locate", "../etc", home=home)
    assert (
        hostile.returncode == 1 and "disallowed character '/'" in hostile.stderr and "Traceback" not in hostile.stderr
    )


def test_env_catalogue_and_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    catalogue = json.loads(dsh("env", "--json", home=home).stdout)
    rows = {r["key"]: r for r in catalogue["variables"]}
    assert {"DSH_HOME", "DSH_SHELL", "DSH_SESSION_ID", "DSH_SESSION_JSONL"} <= set(rows)
    assert rows["DSH_HOME"]["builtin"] and rows["DSH_HOME"]["distribution"] == "dsh-bash-env"
    made = json.loads(dsh("exec", "--json", "--", "true", home=home).stdout)
    values = {
        r["key"]: r["value"]
        for r in json.loads(dsh("env", "--json", "--session", made["session_id"], home=home).stdout)["variables"]
    }
    assert values["DSH_SESSION_ID"] == made["session_id"] and values["DSH_SESSION_JSONL"] == made["location"]["path"]
    assert values["DSH_HOME"] == str(home) and values["DSH_SHELL"] == "1"


def test_errors_are_one_line_unless_debug(tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("plugins:\n  - {id: x, name: no-such}\n")
    proc = dsh("exec", "--deployment", str(deployment), "--", "true", home=tmp_path / "h")
    assert proc.returncode == 125  # dsh exec keeps the lower statuses for the command
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"dsh: {deployment}: deployment did not boot")
    assert "no entry point 'no-such'" in proc.stderr
    debug = dsh("--debug", "exec", "--deployment", str(deployment), "--", "true", home=tmp_path / "h")
    assert "Traceback" in debug.stderr
    deployment.write_text("plugins:\n  - {id: x, config: 3}\n")
    bad = dsh("plugins", "--deployment", str(deployment), home=tmp_path / "h")
    assert bad.returncode == 1 and "entry 'x' (plugins[0]), field 'config'" in bad.stderr
    for empty in (["exec"], ["exec", "--"], ["exec", "--json", "--", " "]):
        usage = dsh(*empty, home=tmp_path / "h")  # a usage error (2), as argparse reports them: not 125
        assert usage.returncode == 2 and usage.stdout == "", usage
        assert usage.stderr.startswith("usage: dsh exec ") and "error: a command is needed after --" in usage.stderr


def test_default_deployment_fires_hooks_from_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    payload = tmp_path / "payload.json"
    (home / "hooks" / "claude.json").write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": f"cat > {payload}"}]}]
                }
            }
        )
    )
    out = json.loads(dsh("exec", "--json", "--", "echo hi", home=home).stdout)
    seen = json.loads(payload.read_text())
    assert seen["hook_event_name"] == "PreToolUse" and seen["tool_name"] == "Bash"
    # Every Claude Code hook is handed the Claude-Code-format view of the session (dsh-hooks' claude_transcript).
    view = home / "transcripts" / "claude-code" / f"{out['session_id']}.jsonl"
    assert seen["session_id"] == out["session_id"] and seen["transcript_path"] == str(view)
    assert seen["tool_input"] == {"command": "echo hi"}


def test_exec_blocked_by_a_hook_exits_126_and_never_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    marker = tmp_path / "ran"
    (home / "hooks" / "codex.json").write_text(
        json.dumps(
            {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "echo 'not today' >&2; exit 2"}]}]}}
        )
    )
    proc = dsh("exec", "--", f"touch {marker}", home=home)
    assert proc.returncode == 126
    assert proc.stderr == "blocked by a PreToolUse hook: not today\n"
    assert not marker.exists()
    (session,) = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    shown = json.loads(dsh("sessions", "show", session["id"], "--json", home=home).stdout)
    result = next(e for e in shown["events"] if e["type"] == "tool/result")
    assert result["data"]["is_error"] and result["data"]["data"]["blocked"] is True


def test_run_script_with_a_subagent_prints_the_conversation(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "user": "who are we?",
                        "steps": [
                            {
                                "text": "asking",
                                "tool_calls": [
                                    {"name": "bash", "arguments": {"command": "echo parent=$DSH_SESSION_ID"}},
                                    {"name": "spawn_agent", "arguments": {"agent_type": "helper", "prompt": "you?"}},
                                ],
                            },
                            {"text": "both answered"},
                        ],
                    }
                ],
                "subagents": {
                    "helper": [
                        {"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]},
                        {"text": "child here"},
                    ]
                },
            }
        )
    )
    home = tmp_path / "home"
    proc = dsh("run", "--script", str(script), home=home)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    session_id = lines[0].removeprefix("session ")
    assert f"parent={session_id}" in lines
    assert "child here" in lines and lines[-1] == "both answered"
    sessions = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    child = next(s for s in sessions if s["id"] != session_id)
    assert child["parent_session"] == session_id and child["origin"] == "subagent"


def test_exec_cwd_must_exist_and_is_the_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    missing = dsh("exec", "--cwd", str(tmp_path / "nope"), "--", "true", home=home)
    assert missing.returncode == 125
    assert missing.stderr == f"dsh: --cwd {tmp_path / 'nope'} is not a directory\n"
    out = json.loads(dsh("exec", "--json", "--cwd", str(tmp_path), "--", "pwd", home=home).stdout)
    assert out["stdout"] == f"{tmp_path}\n"


def test_sessions_show_reads_like_a_transcript(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        "turns:\n"
        "  - user: list then delegate\n"
        "    steps:\n"
        "      - text: Looking.\n"
        "        tool_calls: [{name: bash, arguments: {command: 'echo one; echo two >&2; exit 3'}}]\n"
        "      - tool_calls: [{name: spawn_agent, arguments: {agent_type: helper, prompt: count}}]\n"
        "      - text: done\n"
        "subagents:\n"
        "  helper:\n"
        "    - text: counted\n"
    )
    home = tmp_path / "home"
    ran = json.loads(dsh("run", "--json", "--script", str(script), home=home).stdout)
    shown = dsh("sessions", "show", ran["session_id"], home=home)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"session {ran['session_id']}"
    child = next(line for line in lines if "subagent helper started" in line).rsplit(" ", 1)[1]
    body = "\n".join(lines)
    assert "user:\n    list then delegate\nassistant:\n    Looking.\n" in body
    assert "\n  $ echo one; echo two >&2; exit 3   [call-" in body
    assert "    -> exit 3\n    | one\n    ! two\n" in body
    assert f"subagent session {child} ended:\n    | counted" in body
    assert lines[-1] == "== end of turn"
    structured = json.loads(dsh("sessions", "show", "--json", ran["session_id"], home=home).stdout)
    assert structured["header"]["id"] == ran["session_id"] and structured["events"][0]["type"] == "turn/start"


def test_sessions_show_marks_wrongly_typed_events_and_shows_the_rest(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = json.loads(dsh("exec", "--json", "--", "echo kept", home=home).stdout)
    odd = [
        {"type": "tool/call", "at": 1, "data": {"call_id": "c", "name": "bash", "arguments": "rm -rf /"}},
        {"type": "tool/result", "at": 1, "data": {"call_id": 5, "data": 7}},
        {"type": "hook/result", "at": 1, "data": {"event": "Stop", "reports": [3]}},
        {"type": "message/user", "at": 1, "data": {"text": "after the odd ones"}},
    ]
    with open(made["location"]["path"], "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(event, separators=(",", ":")) + "\n" for event in odd)
        fh.write(json.dumps({"type": "session/flush", "events": len(odd)}, separators=(",", ":")) + "\n")
    shown = dsh("sessions", "show", made["session_id"], home=home)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "| kept" in shown.stdout, "the well-formed events are still shown"
    assert '  [tool/call: unexpected data] {"call_id": "c", "name": "bash", "arguments": "rm -rf /"}' in shown.stdout
    assert '  [tool/result: unexpected data] {"call_id": 5, "data": 7}' in shown.stdout
    assert "  [hook/result: unexpected data]" in shown.stdout
    assert shown.stdout.endswith("user:\n    after the odd ones\n")


@pytest.mark.parametrize(
    "verb",
    [
        (),
        ("exec",),
        ("run",),
        ("env",),
        ("plugins",),
        ("serve",),
        ("sessions",),
        *[("sessions", a) for a in ("list", "show", "locate", "fork", "verify")],
        ("skills",),
    ],
)
def test_every_help_has_examples(tmp_path: Path, verb: tuple[str, ...]) -> None:
    proc = dsh(*verb, "--help", home=tmp_path)
    assert proc.returncode == 0 and "\nexamples:\n  dsh " in proc.stdout
    assert "instead of creating one" not in proc.stdout or verb == ("run",)


def test_env_session_help_says_what_it_does(tmp_path: Path) -> None:
    assert "values a shell call of this stored session" in dsh("env", "--help", home=tmp_path).stdout


def test_a_reader_that_goes_away_ends_the_output_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head -0` would: every write now fails with EPIPE
    stderr = proc.stderr.read().decode()
    assert proc.wait(60) == 141 and stderr == ""


def test_a_one_word_command_starting_with_a_dash_is_run_not_read_as_a_bash_option(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "-hello"
    tool.write_text('#!/bin/sh\necho ran "$@"\n')
    tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = dsh("exec", "--", "-hello there", home=tmp_path / "h", env=env)
    assert proc.returncode == 0 and proc.stdout == "ran there\n", proc.stderr


def test_json_callers_get_a_document_on_failures_before_the_command_ran(tmp_path: Path) -> None:
    home = tmp_path / "h"
    proc = dsh("exec", "--json", "--no-server", "--session", "nope", "--", "true", home=home)
    assert proc.returncode == 125
    document = json.loads(proc.stdout)
    assert document["exit_code"] is None and document["session_id"] is None
    assert document["error"] == (
        f"no session nope under {home / 'sessions'}; `dsh sessions list` lists the sessions of this deployment "
        "and DSH_HOME"
    )
    ran = dsh("exec", "--json", "--no-server", "--", "true", home=home)
    assert list(document) == list(json.loads(ran.stdout)), "a failure's document has every key a run's has"
    assert proc.stderr == f"dsh: {document['error']}\n"
    other = dsh("sessions", "show", "nope", "--json", home=home)
    assert other.returncode == 1 and json.loads(other.stdout) == {"error": document["error"]}


def test_cwd_with_session_is_a_usage_error(tmp_path: Path) -> None:
    proc = dsh("exec", "--cwd", str(tmp_path), "--session", "s1", "--", "true", home=tmp_path / "h")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "error: --cwd applies to a new session; a resumed session (--session) runs in its own" in proc.stderr


def test_a_relative_dsh_home_is_refused_in_one_sentence(tmp_path: Path) -> None:
    for argv, status in ((["exec", "--", "true"], 125), (["env"], 1), (["sessions", "list", "--json"], 1)):
        proc = dsh(*argv, home=tmp_path / "unused", env={"DSH_HOME": "rel/home"}, cwd=tmp_path)
        assert proc.returncode == status, proc.stderr
        sentence = (
            "$DSH_HOME is the relative path 'rel/home'; set it to an absolute path "
            '(for example DSH_HOME="$PWD/rel/home")'
        )
        assert proc.stderr == f"dsh: {sentence}\n"
        assert proc.stdout == ("" if "--json" not in argv else json.dumps({"error": sentence}, indent=2) + "\n")
    assert not (tmp_path / "rel").exists(), "nothing was created under the working directory"


@pytest.mark.parametrize("period", ["1e-9", "0.01", "800000", "1e9", "nan", "0"])
def test_serve_refuses_a_keepalive_no_client_can_wait_on(tmp_path: Path, period: str) -> None:
    # A tiny period cut every served command; a huge one crashed every client's poll (OverflowError).
    done = dsh("serve", "--keepalive", period, home=tmp_path / "home", timeout=60)
    assert done.returncode == 2
    assert f"--keepalive: must be a number of seconds from 0.1 to 3600, not '{period}'" in done.stderr


@pytest.mark.parametrize("target", ["closed", "full"])
def test_output_that_cannot_be_written_is_one_line_and_125_not_a_traceback(tmp_path: Path, target: str) -> None:
    if target == "full" and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux) to fill stdout")
    env = {**os.environ, "DSH_HOME": str(tmp_path / "h")}
    base = [sys.executable, "-m", "dsh.cli", "exec", "--no-server", "--"]

    def run(*words: str) -> subprocess.CompletedProcess[str]:
        if target == "full":
            with open("/dev/full", "w") as full:
                return subprocess.run([*base, *words], stdout=full, stderr=subprocess.PIPE, text=True, env=env)
        # close_fds with stdout never passed: fd 1 is closed in the child, as after `>&-`.
        code = "import os, subprocess, sys; os.close(1); sys.exit(subprocess.call(sys.argv[1:]))"
        return subprocess.run([sys.executable, "-c", code, *base, *words], stderr=subprocess.PIPE, text=True, env=env)

    quiet = run("exit 4")
    assert (quiet.returncode, quiet.stderr) == (4, ""), "nothing to write: the command's status stands"
    lost = run("echo hi; exit 4")
    assert lost.returncode == 125, lost.stderr
    why = ": stdout is closed" if target == "closed" else " to stdout: No space left on device"
    assert lost.stderr == f"dsh: cannot write the output{why}\n"


@pytest.mark.parametrize("target", ["closed", "full"])
@pytest.mark.parametrize(
    "verb",
    [("sessions", "list"), ("sessions", "show", "{id}"), ("sessions", "locate", "{id}"), ("env",), ("plugins",)],
)
def test_every_verb_that_cannot_write_its_lines_says_so_and_exits_1(
    tmp_path: Path, target: str, verb: tuple[str, ...]
) -> None:
    # These printed with print(): with fd 1 closed sys.stdout is None, and print wrote nothing, said
    # nothing and exited 0; a full disk came out as a bare "[Errno 28] ...".
    if target == "full" and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux) to fill stdout")
    home = tmp_path / "h"
    made = dsh("exec", "--no-server", "--json", "--", "true", home=home)
    assert made.returncode == 0, made.stderr
    words = [w.replace("{id}", json.loads(made.stdout)["session_id"]) for w in verb]
    env = {**os.environ, "DSH_HOME": str(home)}
    argv = [sys.executable, "-m", "dsh.cli", *words]
    if target == "full":
        with open("/dev/full", "w") as full:
            lost = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, text=True, env=env)
    else:
        code = "import os, subprocess, sys; os.close(1); sys.exit(subprocess.call(sys.argv[1:]))"
        lost = subprocess.run([sys.executable, "-c", code, *argv], stderr=subprocess.PIPE, text=True, env=env)
    why = ": stdout is closed" if target == "closed" else " to stdout: No space left on device"
    assert (lost.returncode, lost.stderr) == (1, f"dsh: cannot write the output{why}\n")


def _dsh_with(fds: str, *words: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``dsh WORDS`` with ``fds`` set up first: "no-stdout", "no-stderr" (closed, as after ``>&-``) or
    "full-stderr" (``2>/dev/full``); the other streams are captured."""
    run_env = {**os.environ, "DSH_HOME": str(home), **env}
    argv = [sys.executable, "-m", "dsh.cli", *words]
    if fds == "full-stderr":
        with open("/dev/full", "w") as full:
            return subprocess.run(argv, stdout=subprocess.PIPE, stderr=full, text=True, env=run_env)
    close = {"no-stdout": 1, "no-stderr": 2}[fds]
    code = f"import os, subprocess, sys; os.close({close}); sys.exit(subprocess.call(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=run_env)


def test_with_stderr_closed_dsh_s_messages_never_land_in_its_json_on_stdout(tmp_path: Path) -> None:
    # print(file=sys.stderr) with sys.stderr None writes to stdout: the timeout notice, an error's
    # line, a usage line all came out in front of or after the --json document.
    home = tmp_path / "h"
    timed = _dsh_with("no-stderr", "exec", "--no-server", "--json", "--timeout", "1", "--", "sleep 3", home=home)
    assert timed.returncode == 124 and json.loads(timed.stdout)["timed_out"] is True
    missing = _dsh_with("no-stderr", "sessions", "show", "nosuch", "--json", home=home)
    assert missing.returncode == 1 and "error" in json.loads(missing.stdout)
    usage = _dsh_with("no-stderr", "nosuchverb", home=home)
    assert (usage.returncode, usage.stdout) == (2, "")
    # a command's own stderr has nowhere to go: that is lost output, as for a closed stdout
    said = _dsh_with("no-stderr", "exec", "--no-server", "--", "echo out; echo err >&2", home=home)
    assert (said.returncode, said.stdout) == (125, "out\n")


def test_a_full_stderr_loses_neither_the_command_s_output_nor_its_status(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux) to fill stderr")
    home = tmp_path / "h"
    # the timeout notice cannot be written; stdout and the 124 must still come out
    timed = _dsh_with("full-stderr", "exec", "--no-server", "--timeout", "1", "--", "echo OUT; sleep 3", home=home)
    assert (timed.returncode, timed.stdout) == (124, "OUT\n")
    listed = _dsh_with("full-stderr", "sessions", "list", home=home)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 1
    # the command's own stderr is output, not a message: lost, so 125 (and its stdout still out)
    said = _dsh_with("full-stderr", "exec", "--no-server", "--", "echo out; echo err >&2", home=home)
    assert (said.returncode, said.stdout) == (125, "out\n")


def test_with_stdout_lost_the_command_s_stderr_and_notices_still_come_out(tmp_path: Path) -> None:
    home = tmp_path / "h"
    lost = _dsh_with(
        "no-stdout", "exec", "--no-server", "--timeout", "1", "--", "echo out; echo ERR >&2; sleep 3", home=home
    )
    assert lost.returncode == 125
    assert lost.stderr.startswith("ERR\n"), lost.stderr
    assert "timed out" in lost.stderr and lost.stderr.endswith("dsh: cannot write the output: stdout is closed\n")
    # fd 1 was held on /dev/null, so the transcript dsh opened did not become "stdout"
    shown = dsh("sessions", "list", "--json", home=home)
    (only,) = json.loads(shown.stdout)["sessions"]
    show = dsh("sessions", "show", only["id"], "--json", home=home)
    assert show.returncode == 0 and json.loads(show.stdout)["damage"] == []


@pytest.mark.parametrize("target", ["closed", "full"])
def test_help_that_cannot_be_written_says_so(tmp_path: Path, target: str) -> None:
    # argparse drops a failed write: `dsh --help >/dev/full` said nothing and exited 0, and with
    # stdout closed the help went to stderr
    if target == "full" and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux) to fill stdout")
    home = tmp_path / "h"
    for words in (["--help"], ["sessions", "list", "--help"]):
        if target == "full":
            with open("/dev/full", "w") as full:
                done = subprocess.run(
                    [sys.executable, "-m", "dsh.cli", *words], stdout=full, stderr=subprocess.PIPE, text=True
                )
            why = " to stdout: No space left on device"
        else:
            done = _dsh_with("no-stdout", *words, home=home)
            why = ": stdout is closed"
        assert (done.returncode, done.stderr) == (1, f"dsh: cannot write the output{why}\n")


def test_output_the_terminal_s_encoding_cannot_hold_is_escaped_not_a_traceback(tmp_path: Path) -> None:
    done = dsh(
        "exec", "--no-server", "--", "printf 'caf\\303\\251\\n'", home=tmp_path / "h", env={"PYTHONIOENCODING": "ascii"}
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "caf\\xe9\n", "")


def test_ctrl_c_while_loading_ends_dsh_with_130_even_when_stderr_is_full(tmp_path: Path) -> None:
    # The handler's one line raised OSError from inside whatever the signal interrupted (an import,
    # orjson's set-up): dsh went on, crashed or ran the command, instead of ending with 130.
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux) to fill stderr")
    code = (
        "import os, signal; from dsh.cli_fast._client import _stop_loading; "
        "os.dup2(os.open('/dev/full', os.O_WRONLY), 2); _stop_loading(signal.SIGINT, None)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130


def test_a_json_document_stays_json_where_the_encoding_is_ascii(tmp_path: Path) -> None:
    done = dsh(
        "exec", "--no-server", "--json", "--", "printf 'caf\\303\\251 \\360\\237\\230\\200\\n'",
        home=tmp_path / "h", env={"PYTHONIOENCODING": "ascii"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii() and json.loads(done.stdout)["stdout"] == "café \U0001f600\n"


def test_output_to_a_non_blocking_pipe_waits_for_its_reader(tmp_path: Path) -> None:
    # os.write on a full non-blocking pipe raises EAGAIN: that is a reader being slow, not lost output.
    import fcntl
    import time

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # smaller than the output (under its 30,000-character cut)
    fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    env = {**os.environ, "DSH_HOME": str(tmp_path / "h")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "exec", "--no-server", "--", "seq 1 5000"],
        stdout=write_end, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    os.close(write_end)
    time.sleep(2)  # let the pipe fill while nobody reads
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    assert b"".join(chunks).decode().split() == [str(n) for n in range(1, 5001)]


def test_dsh_s_stderr_is_line_buffered_and_drops_what_fd_2_refuses() -> None:
    # Whole lines at once, as Python's own stderr (print writes the text and the newline apart, and
    # another thread's line must not land between them); a full fd 2 is dropped, never raised.
    code = (
        "import os; from dsh.cli_fast._streams import Diagnostics\n"
        "d = Diagnostics('utf-8', 'backslashreplace', False)\n"
        "d.write('a'); os.write(2, b'|'); d.write('b\\nc'); os.write(2, b'|'); d.flush()\n"
        "os.dup2(os.open('/dev/full', os.O_WRONLY), 2); d.write('lost\\n'); d.flush(); print('survived')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (0, "|ab\n|c", "survived\n")


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("turns: 3\n", "field 'turns' must be a list"),
        ("- user: hi\n", "the top level must be a mapping of fields"),
        (
            "turns:\n - user: hi\n   steps: [{tool_calls: [{name: bash, argumnts: {}}]}]\n",
            "field 'turns[0].steps[0].tool_calls[0].argumnts' is not a known field (check its spelling)",
        ),
    ],
)
def test_script_errors_name_file_and_field_in_plain_words(tmp_path: Path, script: str, message: str) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(script)
    proc = dsh("run", "--script", str(path), home=tmp_path / "home")
    assert proc.returncode == 1
    assert proc.stderr == f"dsh: {path}: {message}\n"
    assert "Input should" not in proc.stderr
