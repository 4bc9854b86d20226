"""Lineage end to end: which agent made a call, from which session and call, inside which trace.

Real ``dsh run --script`` with a subagent, real nested ``dsh exec``, real bash children and hooks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

PROBE = (
    'echo "$DSH_SESSION_ID|$DSH_AGENT_ID|$DSH_AGENT_DEPTH|${DSH_PARENT_SESSION_ID-unset}|'
    '${TRACEPARENT-unset}|${TRACESTATE-unset}|${BAGGAGE-unset}"'
)
INCOMING = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def _fields(output: str) -> list[str]:
    return output.split("[exit code")[0].strip().split("|")


def _run(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``dsh`` with this process's environment less any trace context of its own (a
    developer's shell may have one), plus ``env``; checked to succeed."""
    base = {k: v for k, v in os.environ.items() if k.upper() not in {"TRACEPARENT", "TRACESTATE", "BAGGAGE"}}
    full = {**base, **(env or {}), "DSH_HOME": str(home)}
    full["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full.get('PATH', '')}"  # a nested dsh is this one
    proc = subprocess.run(
        [sys.executable, "-m", "dsh.cli", *args], capture_output=True, text=True, env=full, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def _show(home: Path, session_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(_run(home, "sessions", "show", session_id, "--json").stdout)
    return shown


def test_a_subagent_knows_it_is_one_of_which_session_at_which_depth_in_the_same_trace(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "script.json"
    bash = {"name": "bash", "arguments": {"command": PROBE}}
    spawn = {"name": "spawn_agent", "arguments": {"agent_type": "helper", "prompt": "p"}}
    script.write_text(
        json.dumps(
            {
                "turns": [{"user": "go", "steps": [{"tool_calls": [bash, spawn]}, {"text": "done"}]}],
                "subagents": {"helper": [{"tool_calls": [bash]}, {"text": "child done"}]},
            }
        )
    )
    env = {"TRACEPARENT": INCOMING, "TRACESTATE": "vendor=abc", "BAGGAGE": "team=dsh"}
    run = _run(home, "run", "--script", str(script), "--json", env=env)
    out = json.loads(run.stdout)
    parent = out["session_id"]
    parent_fields = _fields(out["turns"][0]["tool_calls"][0]["output"])
    sessions = json.loads(_run(home, "sessions", "list", "--json").stdout)["sessions"]
    (child,) = [s for s in sessions if s["id"] != parent]
    child_output = next(e["data"]["output"] for e in _show(home, child["id"])["events"] if e["type"] == "tool/result")
    child_fields = _fields(child_output)

    assert parent_fields[:4] == [parent, parent, "0", "unset"]
    assert child_fields[:4] == [child["id"], child["id"], "1", parent]
    assert child["parent_session"] == parent and child["delegation_depth"] == 1
    # Both in the incoming trace, each naming a span of its own call, never the value dsh was handed.
    for fields in (parent_fields, child_fields):
        version, trace_id, span_id, flags = fields[4].split("-")
        assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
        assert fields[4] != INCOMING and span_id != "0" * 16
        assert fields[5:] == ["vendor=abc", "team=dsh"]
    assert parent_fields[4] != child_fields[4]
    # The parent's transcript names the subagent session it started.
    children = _show(home, parent)["children"]
    assert children == [{"session_id": child["id"], "origin": "subagent", "call_id": None}]


def test_a_nested_dsh_records_its_parent_call_and_its_children_name_it_never_as_their_own(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = _run(home, "exec", "--json", "--", "dsh", "exec", "--json", "--", PROBE)
    outer = json.loads(proc.stdout)
    inner = json.loads(outer["stdout"])
    fields = _fields(inner["stdout"])
    outer_call = next(
        e["data"]["call_id"] for e in _show(home, outer["session_id"])["events"] if e["type"] == "tool/call"
    )

    # The inner run's children: their own session and agent, the outer session as their parent.
    assert fields[:4] == [inner["session_id"], inner["session_id"], "0", outer["session_id"]]
    inner_header = _show(home, inner["session_id"])["header"]
    assert isinstance(inner_header, dict)
    assert (inner_header["outer_session"], inner_header["outer_call"]) == (outer["session_id"], outer_call)
    assert inner_header["parent_session"] is None  # a claim, not a parent this harness made
    # A new trace per run: the outer command's child started the inner dsh with its call's span.
    assert fields[4].startswith("00-") and fields[5:] == ["unset", "unset"]

    # Both ways: the outer session names the inner one under the call that started it, and back.
    shown = _show(home, outer["session_id"])
    assert shown["children"] == [{"session_id": inner["session_id"], "origin": "nested", "call_id": outer_call}]
    text = _run(home, "sessions", "show", outer["session_id"]).stdout
    assert f"call {outer_call} started session {inner['session_id']}" in text
    assert f"started session {inner['session_id']}" in text.split(f"[{outer_call}]", 1)[1]
    inner_text = _run(home, "sessions", "show", inner["session_id"]).stdout
    assert f"started inside call {outer_call} of session {outer['session_id']}" in inner_text


def test_a_forged_or_malformed_outer_identity_is_recorded_as_claimed_and_trusted_for_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    forged = {"DSH_SESSION_ID": "../../etc/\x1b[31mpasswd" + "x" * 300, "DSH_TOOL_CALL_ID": "call one"}
    proc = _run(home, "exec", "--json", "--", PROBE, env=forged)
    done = json.loads(proc.stdout)
    fields = _fields(done["stdout"])
    header = _show(home, done["session_id"])["header"]
    assert isinstance(header, dict)
    claim = header["outer_session"]
    assert isinstance(claim, str) and len(claim) == 128 and claim.startswith("../../etc/?[31mpasswd")
    assert header["outer_call"] == "call?one"
    # Malformed: not handed on as a parent, and never as the child's own identity.
    assert fields[:4] == [done["session_id"], done["session_id"], "0", "unset"]

    # A well-formed but forged one is passed on as the claimed parent only; nothing else trusts it.
    proc = _run(home, "exec", "--json", "--", PROBE, env={"DSH_SESSION_ID": "no-such-session"})
    again = json.loads(proc.stdout)
    assert _fields(again["stdout"])[:4] == [again["session_id"], again["session_id"], "0", "no-such-session"]


def test_trace_context_is_continued_new_per_run_and_malformed_values_never_pass(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = json.loads(_run(home, "exec", "--json", "--", PROBE).stdout)
    second = json.loads(_run(home, "exec", "--json", "--", PROBE).stdout)
    one, two = _fields(first["stdout"])[4], _fields(second["stdout"])[4]
    assert one.split("-")[1] != two.split("-")[1]  # a new trace per dsh exec

    bad = {"TRACEPARENT": "00-" + "0" * 32 + "-b7ad6b7169203331-01", "TRACESTATE": "a=1", "BAGGAGE": "x"}
    done = json.loads(_run(home, "exec", "--json", "--", PROBE, env=bad).stdout)
    parent, state, baggage = _fields(done["stdout"])[4:]
    assert parent.startswith("00-") and "0" * 32 not in parent  # a new trace, not the invalid one
    assert (state, baggage) == ("unset", "unset")  # tracestate without a valid parent, malformed baggage

    lower = {"traceparent": INCOMING}  # an ambient carrier in another case never reaches a child
    done = json.loads(_run(home, "exec", "--json", "--", "env", env=lower).stdout)
    assert INCOMING not in done["stdout"]


def test_a_hook_gets_the_span_of_the_call_it_runs_for(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    home.chmod(0o700)
    (home / "hooks").chmod(0o700)
    seen = tmp_path / "seen"
    hook = {"type": "command", "command": f'echo "$TRACEPARENT" >> {seen}'}
    settings = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}}
    (home / "hooks" / "claude.json").write_text(json.dumps(settings))
    (home / "hooks" / "claude.json").chmod(0o600)
    proc = _run(home, "exec", "--json", "--", 'echo "$TRACEPARENT"', env={"TRACEPARENT": INCOMING})
    child = json.loads(proc.stdout)["stdout"].strip()
    assert seen.read_text().split() == [child]
    assert child.split("-")[1] == TRACE_ID and child != INCOMING


def _traced_facts(stdout: str) -> dict[str, str]:
    names = ("DSH_SESSION_ID", "DSH_AGENT_ID", "DSH_AGENT_DEPTH", "TRACEPARENT", "TRACESTATE", "BAGGAGE")
    return dict(line.split("=", 1) for line in stdout.splitlines() if line.split("=", 1)[0] in names)


def test_a_sandboxed_child_gets_the_lineage_and_its_own_span(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: the sandbox world cannot be started")
    outside = Path(tempfile.mkdtemp(prefix="dsh-lineage-", dir="/var/tmp"))  # a sandbox replaces /tmp
    try:
        deployment = outside / "deployment.yaml"
        deployment.write_text("plugins:\n  - {id: bash-local, name: bash-sandbox, config: {mode: read-only}}\n")
        env = {"TRACEPARENT": INCOMING, "TRACESTATE": "vendor=abc", "BAGGAGE": "team=dsh"}
        out = json.loads(
            _run(outside / "home", "exec", "--json", "--deployment", str(deployment), "--", "env", env=env).stdout
        )
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    facts = _traced_facts(out["stdout"])
    assert (facts["DSH_AGENT_ID"], facts["DSH_AGENT_DEPTH"]) == (out["session_id"], "0")
    assert facts["TRACEPARENT"].split("-")[1] == TRACE_ID and facts["TRACEPARENT"] != INCOMING
    assert (facts["TRACESTATE"], facts["BAGGAGE"]) == ("vendor=abc", "team=dsh")


def test_an_ssh_child_gets_dshs_trace_context_never_the_hosts(tmp_path: Path) -> None:
    from dsh.bash_ssh.testing import TemporaryHost

    if os.geteuid() != 0 or shutil.which("sshd", path="/usr/sbin:/usr/bin") is None:
        pytest.skip("a throw-away sshd needs root and OpenSSH's sshd")
    stale = "00-11111111111111111111111111111111-2222222222222222-01"
    host = TemporaryHost(environment=f"TRACEPARENT={stale}\nBAGGAGE=stale=1\ntraceparent={stale}\n")
    host.setup()
    try:
        deployment = tmp_path / "deployment.yaml"
        deployment.write_text(
            "plugins:\n  - id: bash-local\n    name: bash-ssh\n    config:\n"
            f"      host: {host.host}\n      port: {host.port}\n      user: {host.user}\n"
            f"      identity_file: {host.identity_file}\n      known_hosts: {host.known_hosts}\n"
        )
        args = ("exec", "--json", "--deployment", str(deployment), "--cwd", str(host.home), "--", "env")
        out = json.loads(_run(tmp_path / "h", *args, env={"TRACEPARENT": INCOMING}).stdout)
    finally:
        host.cleanup()
    assert out["exit_code"] == 0, out
    facts = _traced_facts(out["stdout"])
    assert facts["DSH_AGENT_ID"] == out["session_id"]
    assert facts["TRACEPARENT"].split("-")[1] == TRACE_ID and facts["TRACEPARENT"] != INCOMING
    assert "BAGGAGE" not in facts  # the host's login environment never speaks for dsh
    assert stale not in out["stdout"]


def test_a_served_exec_continues_the_clients_trace(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSH_") and k.upper() != "TRACEPARENT"}
    env["DSH_HOME"] = str(home)
    server = subprocess.Popen([sys.executable, "-m", "dsh.cli", "serve"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        while line.startswith("dsh: warning: "):
            line = server.stderr.readline()
        assert line.startswith("dsh serve: listening on "), line
        served = json.loads(_run(home, "exec", "--json", "--", PROBE, env={"TRACEPARENT": INCOMING}).stdout)
        other = json.loads(_run(home, "exec", "--json", "--", PROBE).stdout)
    finally:
        server.send_signal(signal.SIGTERM)
        _, log = server.communicate(timeout=30)
    assert f"exec in session {served['session_id']} exited 0" in log  # it was served
    mine, theirs = _fields(served["stdout"])[4], _fields(other["stdout"])[4]
    assert mine.split("-")[1] == TRACE_ID and mine != INCOMING
    assert theirs.split("-")[1] != TRACE_ID  # the next client, without one: a trace of its own


def test_a_nested_dsh_continues_the_outer_runs_trace_from_its_calls_span(tmp_path: Path) -> None:
    home = tmp_path / "home"
    probe = 'echo "$TRACEPARENT"; dsh exec --json -- ' + "'" + PROBE + "'"
    outer = json.loads(_run(home, "exec", "--json", "--", probe, env={"TRACEPARENT": INCOMING}).stdout)
    outer_child, inner_json = outer["stdout"].split("\n", 1)
    inner_fields = _fields(json.loads(inner_json)["stdout"])
    # The outer call's child (the inner dsh) was handed the outer call's span; the inner run's own
    # child is a span of the same trace, never the value the inner dsh was handed.
    assert outer_child.split("-")[1] == TRACE_ID == inner_fields[4].split("-")[1]
    assert inner_fields[4] not in (outer_child, INCOMING)
