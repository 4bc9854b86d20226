"""dsh sessions over a SQLite deployment (dsh-agent with dsh-persistence-sqlite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import dsh

pytestmark = pytest.mark.integration


def _exec(home: Path, command: str, *extra: str) -> dict[str, Any]:
    proc = dsh("exec", "--json", *extra, "--", command, home=home)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_verify_by_session_id_asks_the_deployment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = _exec(home, "true")
    found = dsh("sessions", "verify", "--session", out["session_id"], home=home)
    assert found.returncode == 0 and found.stdout.startswith(f"ok: {out['location']['path']}")
    unknown = dsh("sessions", "verify", "--session", "no-such-session", home=home)
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (1, "", "dsh: no stored session no-such-session\n")

    deployment = tmp_path / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    stored = _exec(home, "true", "--deployment", str(deployment))
    verdict = json.loads(
        dsh(
            "sessions",
            "verify",
            "--session",
            stored["session_id"],
            "--deployment",
            str(deployment),
            "--json",
            home=home,
        ).stdout
    )
    assert verdict["status"] == "consistent" and verdict["path"] is None
    said = dsh("sessions", "verify", "--session", stored["session_id"], "--deployment", str(deployment), home=home)
    assert (said.returncode, said.stderr) == (0, "")
    assert said.stdout == f"ok: stored session {stored['session_id']} is consistent\n"  # not "X belongs to X"


def test_a_transcript_file_is_read_by_the_deployment_s_backend_through_the_seam(tmp_path: Path) -> None:
    """Issue 40: dsh-cli named the JSONL backend to read a file; now the deployment's backend reads it (or says no)."""
    home = tmp_path / "home"
    out = _exec(home, "true")
    deployment = tmp_path / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    args = ("sessions", "verify", "--session", out["session_id"], "--path", out["location"]["path"])
    assert dsh(*args, home=home).returncode == 0  # the default deployment's JSONL backend reads its file
    refused = dsh(*args, "--deployment", str(deployment), home=home)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"dsh: {out['location']['path']}: the deployment's SqlitePersistence keeps no transcript files, "
        "so it cannot read this one; verify the session with --session ID, "
        "or pass the deployment that wrote it (--deployment)\n"
    )
