"""A command that began is never unrecorded: ``dsh exec`` and ``dsh run`` killed with a real SIGKILL
while their command runs, on JSONL, SQLite and PostgreSQL; then ``dsh sessions verify``, ``show``,
``list`` and a resumed session whose model (a loopback Chat Completions server) is told."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import Endpoint, dsh
from tests.integration.serve_support import clean_env

pytestmark = pytest.mark.integration

KEY = "sk-write-ahead-secret"


def _deployment(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> list[str]:
    """``--deployment FILE`` for ``backend`` (nothing for the default JSONL)."""
    if backend == "jsonl":
        return []
    path = tmp_path / "deployment.yaml"
    if backend == "sqlite":
        path.write_text("persistence: {backend: sqlite}\n")
    else:
        server = request.getfixturevalue("postgres_server")
        config = {"dsn": server.dsn, "schema": request.getfixturevalue("pg_schema")}
        path.write_text(f"persistence: {{backend: postgres, config: {json.dumps(config)}}}\n")
    return ["--deployment", str(path)]


def _killed_while_running(verb: str, tmp_path: Path, home: Path, deployment: list[str]) -> dict[str, str]:
    """Start ``dsh VERB`` whose command records its facts then sleeps; SIGKILL dsh while it sleeps.

    Returns what the command saw (session, call, transcript variable) and its effect file.
    """
    facts, effect = tmp_path / "facts", tmp_path / "effect"
    command = (
        f'touch {effect}; echo "$$ $DSH_SESSION_ID $DSH_TOOL_CALL_ID ${{DSH_SESSION_JSONL:-none}}" > {facts}.tmp; '
        f"mv {facts}.tmp {facts}; sleep 30"
    )
    if verb == "exec":
        args = ["exec", "--no-server", *deployment, "--", command]
    else:
        script = tmp_path / "script.json"
        steps = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "done"}]
        script.write_text(json.dumps({"turns": [{"user": "go", "steps": steps}]}))
        args = ["run", *deployment, "--script", str(script)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", *args],
        env=clean_env(home),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not facts.exists():
        if proc.poll() is not None:
            pytest.fail(f"dsh ended ({proc.returncode}) before its command ran: {proc.communicate()}")
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    shell, session_id, call_id, jsonl = facts.read_text().split()
    proc.send_signal(signal.SIGKILL)  # no handler, no flush: the turn dies with dsh
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    with contextlib.suppress(ProcessLookupError):
        os.killpg(int(shell), signal.SIGKILL)  # the orphaned command, which outlived dsh
    assert effect.exists(), "the command ran and had its effect"
    return {"session": session_id, "call": call_id, "jsonl": jsonl}


def _told(body: dict[str, Any]) -> list[str]:
    """The user-side texts a Chat Completions request carries."""
    said = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        said.extend(parts)
    return said


@pytest.mark.parametrize("verb", ["exec", "run"])
@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgres"])
def test_a_sigkill_while_the_command_runs_leaves_it_recorded_as_begun_with_its_outcome_unknown(
    tmp_path: Path, backend: str, verb: str, request: pytest.FixtureRequest
) -> None:
    home = tmp_path / "home"
    deployment = _deployment(tmp_path, backend, request)
    seen = _killed_while_running(verb, tmp_path, home, deployment)
    session_id, call_id = seen["session"], seen["call"]
    if backend == "jsonl":
        # The transcript stays lazy (its first checkpoint never came); the record sits beside it.
        transcript = Path(seen["jsonl"])
        assert not transcript.exists()
        assert Path(f"{transcript}.began").is_file()
        assert Path(f"{transcript}.began").stat().st_mode & 0o777 == 0o600

    verified = dsh("sessions", "verify", *deployment, "--session", session_id, "--json", home=home)
    assert verified.returncode == 1, verified.stderr
    verdict = json.loads(verified.stdout)
    assert verdict["status"] == "inconsistent"
    (unknown,) = verdict["unknown_outcomes"]
    assert (unknown["call_id"], unknown["name"], unknown["folded"], unknown["running"]) == (
        call_id,
        "bash",
        False,
        False,
    )
    assert "sleep 30" in unknown["arguments"]["command"]
    (problem,) = verdict["problems"]
    assert f"call {call_id} (bash: " in problem and "its outcome is unknown" in problem
    # The same shell's own check, by its $DSH_* facts: the call is known, as begun.
    own = dsh(
        "sessions",
        "verify",
        *deployment,
        "--call",
        "--json",
        home=home,
        env={"DSH_SESSION_ID": session_id, "DSH_TOOL_CALL_ID": call_id, "DSH_TURN_ID": f"{session_id}:turn-1"},
    )
    assert own.returncode == 1, own.stderr
    assert json.loads(own.stdout)["call"] == {"id": call_id, "status": "unknown"}
    text = dsh("sessions", "verify", *deployment, "--session", session_id, home=home)
    # A problem is a refusal of the transcript: one `dsh:` line on stderr, nothing on stdout.
    assert (text.returncode, text.stdout) == (1, ""), text.stderr
    assert text.stderr.startswith("dsh: call ") and "its outcome is unknown" in text.stderr

    listed = dsh("sessions", "list", *deployment, "--json", home=home)
    assert [s["id"] for s in json.loads(listed.stdout)["sessions"]] == [session_id], listed.stderr
    shown = dsh("sessions", "show", *deployment, session_id, home=home)
    assert shown.returncode == 0, shown.stderr
    assert (
        f"[{call_id}]" in shown.stdout and "outcome unknown: not recorded (dsh was stopped while it ran" in shown.stdout
    )
    events = json.loads(dsh("sessions", "show", *deployment, session_id, "--json", home=home).stdout)["events"]
    assert [e["type"] for e in events] == ["tool/began"] and events[0]["data"]["call_id"] == call_id

    # Resumed, the model is told; the turn's checkpoint folds the record into the transcript.
    env = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "wa-model"}
    with Endpoint() as endpoint:
        endpoint.queue(
            {
                "json": {
                    "id": "chatcmpl-x",
                    "object": "chat.completion",
                    "created": 1764600000,
                    "model": "wa-model",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "I will check first"},
                            "finish_reason": "stop",
                            "logprobs": None,
                        }
                    ],
                }
            }
        )
        env["OPENAI_BASE_URL"] = f"{endpoint.url}/v1"
        resumed = dsh(
            "run", *deployment, "--model", "openai", "--session", session_id, "--prompt", "go on", home=home, env=env
        )
        assert resumed.returncode == 0, resumed.stderr
        said = _told(endpoint.seen[0].body)
    (notice,) = [s for s in said if call_id in s]
    assert "outcome is unknown" in notice and "sleep 30" in notice
    assert said[-1] == "go on"
    if backend == "jsonl":
        assert Path(seen["jsonl"]).is_file() and not Path(f"{seen['jsonl']}.began").exists()
    again = json.loads(dsh("sessions", "verify", *deployment, "--session", session_id, "--json", home=home).stdout)
    assert again["status"] == "consistent" and again["problems"] == []
    assert [(u["call_id"], u["folded"]) for u in again["unknown_outcomes"]] == [(call_id, True)]
    stored = json.loads(dsh("sessions", "show", *deployment, session_id, "--json", home=home).stdout)["events"]
    assert [e["type"] for e in stored][:2] == ["tool/began", "turn/start"]
    assert sum(e["type"] == "tool/began" for e in stored) == 1


def test_a_command_that_ends_leaves_no_record_beside_the_transcript(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ran = dsh("exec", "--no-server", "--json", "--", "echo hi", home=home)
    assert ran.returncode == 0, ran.stderr
    path = Path(json.loads(ran.stdout)["location"]["path"])
    assert path.is_file() and not Path(f"{path}.began").exists()
    assert "tool/began" not in path.read_text()
    verified = dsh(
        "sessions", "verify", "--path", str(path), "--session", json.loads(ran.stdout)["session_id"], home=home
    )
    assert verified.returncode == 0, verified.stderr


def test_a_record_file_replaced_by_a_symlink_is_never_written_through_and_nothing_runs(tmp_path: Path) -> None:
    home, ran, elsewhere = tmp_path / "home", tmp_path / "ran", tmp_path / "elsewhere"
    first = dsh("exec", "--no-server", "--json", "--", "true", home=home, cwd=tmp_path)
    out = json.loads(first.stdout)
    began = Path(f"{out['location']['path']}.began")
    began.symlink_to(elsewhere)
    proc = dsh("exec", "--no-server", "--session", out["session_id"], "--", f"touch {ran}", home=home, cwd=tmp_path)
    assert proc.returncode == 125
    assert proc.stderr == f"dsh: {began} is a symbolic link; move it aside\n"
    assert not ran.exists() and not elsewhere.exists()


def test_a_record_that_cannot_be_stored_means_the_command_does_not_run(tmp_path: Path) -> None:
    import sqlite3

    home, ran = tmp_path / "home", tmp_path / "ran"
    deployment = tmp_path / "d.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    first = dsh("exec", "--no-server", "--json", "--deployment", str(deployment), "--", "true", home=home)
    session_id = json.loads(first.stdout)["session_id"]
    with sqlite3.connect(home / "sessions.sqlite3") as db:  # the database refuses the record, as a full disk would
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON began BEGIN SELECT RAISE(ABORT, 'no room'); END")
    proc = dsh(
        "exec", "--no-server", "--deployment", str(deployment), "--session", session_id, "--", f"touch {ran}", home=home
    )
    assert proc.returncode == 125, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("dsh: tool 'bash' did not run: its start could not be recorded: ")
    assert f"recording that a command of session {session_id} began" in line and "no room" in line
    assert not ran.exists()


def test_a_served_call_whose_server_is_killed_is_recorded_as_begun(tmp_path: Path) -> None:
    from tests.integration.serve_support import ServeProcess

    home, facts = tmp_path / "home", tmp_path / "facts"
    server = ServeProcess(home)
    command = f'echo "$$ $DSH_SESSION_ID $DSH_TOOL_CALL_ID" > {facts}.tmp; mv {facts}.tmp {facts}; sleep 30'
    client = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "exec", "--", command],
        env=clean_env(home),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not facts.exists():
            assert client.poll() is None, client.communicate()
            assert time.monotonic() < deadline, "the served command never started"
            time.sleep(0.02)
        _, session_id, call_id = facts.read_text().split()
        server.stop(signal.SIGKILL)
        _, err = client.communicate(timeout=60)
        assert client.returncode != 0, err
    finally:
        if client.poll() is None:
            client.kill()
        server.stop(signal.SIGKILL)
        if facts.exists():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(facts.read_text().split()[0]), signal.SIGKILL)
    verdict = json.loads(dsh("sessions", "verify", "--session", session_id, "--json", home=home).stdout)
    assert [(u["call_id"], u["folded"], u["running"]) for u in verdict["unknown_outcomes"]] == [(call_id, False, False)]
    assert verdict["status"] == "inconsistent" and "its outcome is unknown" in verdict["problems"][0]
