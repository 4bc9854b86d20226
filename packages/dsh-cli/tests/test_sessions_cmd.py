"""``dsh sessions fork`` and ``dsh sessions verify`` through the real command."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import dsh

pytestmark = pytest.mark.integration


def _exec(home: Path, command: str, *extra: str) -> dict[str, Any]:
    proc = dsh("exec", "--json", *extra, "--", command, home=home)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _show(home: Path, session_id: str) -> dict[str, Any]:
    proc = dsh("sessions", "show", session_id, "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_fork_at_a_turn_makes_a_new_stored_session_that_exec_resumes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _exec(home, "echo one")
    parent = first["session_id"]
    _exec(home, "echo two", "--session", parent)

    forked = dsh("sessions", "fork", parent, "--at", "1", "--json", home=home)
    assert forked.returncode == 0, forked.stderr
    fork = json.loads(forked.stdout)
    assert fork["session_id"] != parent
    assert (fork["parent_session"], fork["origin"], fork["at_turn"]) == (parent, "fork", 1)
    assert fork["location"]["path"] != first["location"]["path"]
    header = json.loads(Path(fork["location"]["path"]).read_text().splitlines()[0])["header"]
    assert (header["id"], header["parent_session"], header["origin"]) == (fork["session_id"], parent, "fork")
    assert header["seed_length"] == fork["seed_length"] > 0
    events = _show(home, fork["session_id"])["events"]
    outputs = [e["data"]["output"] for e in events if e["type"] == "tool/result"]
    assert len(outputs) == 1 and outputs[0].startswith("one"), "only the first turn was copied"
    assert events[-1]["type"] == "session/fork" and events[-1]["data"]["parent_session"] == parent

    seen = _exec(home, 'echo "$DSH_SESSION_ID $DSH_SESSION_JSONL"', "--session", fork["session_id"])
    assert seen["stdout"] == f"{fork['session_id']} {fork['location']['path']}\n"
    assert [e["type"] for e in _show(home, parent)["events"]].count("turn/start") == 2, "the parent is untouched"


def test_fork_defaults_to_every_turn_prints_the_id_and_refuses_a_bad_turn(tmp_path: Path) -> None:
    home = tmp_path / "home"
    parent = _exec(home, "true")["session_id"]
    plain = dsh("sessions", "fork", parent, home=home)
    assert plain.returncode == 0, plain.stderr
    new_id = plain.stdout.strip()
    assert [e["type"] for e in _show(home, new_id)["events"]].count("turn/start") == 1
    empty = dsh("sessions", "fork", parent, "--at", "0", home=home).stdout.strip()
    assert [e["type"] for e in _show(home, empty)["events"]] == ["session/fork"]
    assert _exec(home, "echo $DSH_SESSION_ID", "--session", empty)["stdout"] == f"{empty}\n"
    bad = dsh("sessions", "fork", parent, "--at", "5", home=home)
    assert bad.returncode == 1 and bad.stderr == f"dsh: session {parent} has 1 turn(s); --at takes 0 to 1\n"
    missing = dsh("sessions", "fork", "nope", home=home)
    assert missing.returncode == 1 and missing.stderr.startswith("dsh: no session nope")


def test_verify_inside_managed_shells_first_turn_unflushed_then_consistent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _exec(home, "dsh sessions verify --call --json")
    verdict = json.loads(first["stdout"])
    assert first["exit_code"] == 0
    assert verdict["status"] == "unflushed" and verdict["problems"] == []
    assert verdict["call"]["status"] == "pending"
    assert verdict["path"] == first["location"]["path"]
    second = _exec(home, "dsh sessions verify --call", "--session", first["session_id"])
    assert second["exit_code"] == 0
    assert second["stdout"].startswith(f"ok: {first['location']['path']} belongs to session {first['session_id']}")
    assert second["stdout"].rstrip().endswith("is pending")


def _managed(out: dict[str, Any], home: Path, **extra: str) -> dict[str, str]:
    """The DSH_* facts of the session's (flushed) first call, as its shell had them."""
    events = _show(home, out["session_id"])["events"]
    call = next(e["data"]["call_id"] for e in events if e["type"] == "tool/call")
    turn = next(e["data"]["turn_id"] for e in events if e["type"] == "turn/start")
    env = {
        "DSH_SESSION_ID": out["session_id"],
        "DSH_SESSION_JSONL": out["location"]["path"],
        "DSH_TOOL_CALL_ID": call,
        "DSH_TURN_ID": turn,
    }
    return {**env, **extra}


def test_verify_finds_a_recorded_call_and_reports_each_problem_on_its_own_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = _exec(home, "true")
    env = _managed(out, home)
    ok = dsh("sessions", "verify", "--call", home=home, env=env)
    assert ok.returncode == 0 and ok.stdout.rstrip().endswith("is recorded"), ok.stdout + ok.stderr

    other = _exec(home, "true")
    copy = tmp_path / "copy.jsonl"
    shutil.copy(other["location"]["path"], copy)
    os.chmod(copy, 0o666)
    bad = dsh("sessions", "verify", home=home, env={**env, "DSH_SESSION_JSONL": str(copy)})
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.splitlines() == [
        f"dsh: {copy} is writable by group or others (mode 0666); dsh writes transcripts 0600",
        f"dsh: {copy}: the header's session id is {other['session_id']}, not {out['session_id']}",
    ]
    never = dsh("sessions", "verify", "--call", home=home, env={**env, "DSH_TOOL_CALL_ID": "call-never"})
    assert never.returncode == 1
    assert never.stderr == (
        f"dsh: call call-never is not recorded in {out['location']['path']}, and its turn {env['DSH_TURN_ID']} "
        "has ended\n"
    )
    as_json = json.loads(
        dsh("sessions", "verify", "--json", home=home, env={**env, "DSH_SESSION_JSONL": str(copy)}).stdout
    )
    assert as_json["status"] == "inconsistent" and len(as_json["problems"]) == 2

    # The folder is judged by dsh-paths' one trust rule too: group-writable is as bad as others-writable.
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o770)
    kept = shared / "kept.jsonl"
    shutil.copy(out["location"]["path"], kept)
    os.chmod(kept, 0o600)
    loose = dsh("sessions", "verify", home=home, env={**env, "DSH_SESSION_JSONL": str(kept)})
    assert (loose.returncode, loose.stdout) == (1, "")
    assert loose.stderr.splitlines() == [
        f"dsh: {shared} is writable by group or others, who could replace the transcript"
    ]


def test_verify_refuses_symlinks_and_a_vanished_transcript(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = _exec(home, "true")
    env = _managed(out, home)
    link = tmp_path / "link.jsonl"
    link.symlink_to(out["location"]["path"])
    linked = dsh("sessions", "verify", "--call", "--path", str(link), home=home, env=env)
    assert linked.returncode == 1
    assert linked.stderr == f"dsh: {link} is a symbolic link; dsh never writes a transcript through one\n"
    # Absent during turn 2: the first turn was flushed, so the file should be there.
    later = {**env, "DSH_SESSION_JSONL": str(tmp_path / "gone.jsonl"), "DSH_TURN_ID": f"{out['session_id']}:turn-2"}
    gone = dsh("sessions", "verify", home=home, env=later)
    assert gone.returncode == 1 and gone.stderr == f"dsh: {tmp_path / 'gone.jsonl'} does not exist\n"
    nothing = dsh("sessions", "verify", home=home)
    assert nothing.returncode == 1 and "pass --session ID" in nothing.stderr and nothing.stderr.count("\n") == 1
