"""The ``dsh`` command with the SQLite backend installed beside dsh-agent: a real process each time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import dsh

pytestmark = pytest.mark.integration


def test_plugins_lists_our_distributions_with_state(tmp_path: Path) -> None:
    out = json.loads(dsh("plugins", "--json", home=tmp_path / "h").stdout)
    rows = {(r["group"], r["name"]): r for r in out["plugins"]}
    assert rows[("dsh.plugins", "bash-env")]["distribution"] == "dsh-bash-env"
    assert rows[("dsh.plugins", "bash-env")]["version"] == "0.1.0"
    assert rows[("dsh.plugins", "bash-env")]["state"] == "active"
    assert rows[("dsh.persistence", "jsonl")]["state"] == "active"
    assert rows[("dsh.persistence", "sqlite")]["state"] == "not loaded"
    assert out["problems"] == []


def test_sqlite_deployment_has_no_transcript_variable(tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")  # the SQLite README's snippet: the rest is default
    out = json.loads(
        dsh(
            "exec",
            "--json",
            "--deployment",
            str(deployment),
            "--",
            "echo ${DSH_SESSION_JSONL-unset}",
            home=tmp_path / "h",
        ).stdout
    )
    assert out["location"] is None and out["stdout"] == "unset\n"
    assert (tmp_path / "h" / "sessions.sqlite3").exists()


def test_locate_on_sqlite_prints_nothing_on_stdout_and_exits_1(tmp_path: Path) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    home = tmp_path / "h"
    made = json.loads(dsh("exec", "--json", "--deployment", str(deployment), "--", "true", home=home).stdout)
    located = dsh("sessions", "locate", made["session_id"], "--deployment", str(deployment), home=home)
    assert located.returncode == 1 and located.stdout == "", located
    assert located.stderr == (
        f"dsh: session {made['session_id']} has no transcript file: the sqlite backend keeps it in its database "
        "(`dsh sessions show` reads it)\n"
    )
    as_json = dsh("sessions", "locate", made["session_id"], "--deployment", str(deployment), "--json", home=home)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["location"] is None


def test_plugins_columns_line_up_whatever_the_longest_group(tmp_path: Path) -> None:
    # dsh.hook_dialects is longer than a 16-column group field once was: each column still starts at one offset.
    rows = json.loads(dsh("plugins", "--json", home=tmp_path / "h").stdout)["plugins"]
    lines = dsh("plugins", home=tmp_path / "h").stdout.splitlines()[1:]
    assert len(lines) == len(rows) and any(r["group"] == "dsh.hook_dialects" for r in rows)
    offsets = set()
    for row, line in zip(rows, lines, strict=True):
        name_at = line.index(f" {row['name']} ", len(row["group"])) + 1
        state_at = line.rindex(f" {row['state']}") + 1
        offsets.add((name_at, state_at))
    assert len(offsets) == 1, lines
