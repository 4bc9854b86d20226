"""The keyless full loop of the seed note: a real agent loop, JSONL, the bash tool and bash on turn one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh.persistence.jsonl import HEADER_TYPE
from tests.helpers import dsh

pytestmark = pytest.mark.integration

PROBE = (
    'echo "home=$DSH_HOME"; echo "shell=$DSH_SHELL"; echo "id=$DSH_SESSION_ID"; echo "jsonl=$DSH_SESSION_JSONL"; '
    'echo "sentinel=${DSH_STALE_SENTINEL-unset}"; '
    'echo "outer=${CLAUDE_CODE_SESSION_ID-unset}/${CLAUDE_ENV_FILE-unset}/${CODEX_THREAD_ID-unset}"; '
    'if [ -e "$DSH_SESSION_JSONL" ]; then echo "transcript=present"; else echo "transcript=absent"; fi'
)


def test_first_turn_knows_identity_and_target_and_no_stale_value_leaks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "script.yaml"
    script.write_text(
        "turns:\n"
        "  - user: where am I?\n"
        "    steps:\n"
        f"      - {{text: probing, tool_calls: [{{name: bash, arguments: {{command: {json.dumps(PROBE)}}}}}]}}\n"
        "      - {text: done}\n"
    )
    stale = {
        "DSH_STALE_SENTINEL": "from-an-outer-harness",
        "DSH_SESSION_ID": "outer-session",
        "DSH_SESSION_JSONL": "/outer/transcript.jsonl",
        "dsh_shell": "0",
        # dsh run inside Claude Code or Codex: that harness's session is not this one.
        "CLAUDE_CODE_SESSION_ID": "outer-claude-session",
        "CLAUDE_ENV_FILE": str(tmp_path / "outer.env"),
        "CODEX_THREAD_ID": "outer-thread",
    }
    proc = dsh("run", "--script", str(script), "--json", home=home, env=stale, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    session_id, path = out["session_id"], out["location"]["path"]
    assert session_id != "outer-session"
    printed = dict(
        line.split("=", 1) for line in out["turns"][0]["tool_calls"][0]["output"].splitlines() if "=" in line
    )
    assert printed == {
        "home": str(home),
        "shell": "1",
        "id": session_id,
        "jsonl": path,
        "sentinel": "unset",
        "outer": "unset/unset/unset",
        "transcript": "absent",
    }
    assert Path(path).is_relative_to(home / "sessions")
    first = json.loads(Path(path).read_text().splitlines()[0])
    assert (
        first["type"] == HEADER_TYPE and first["header"]["id"] == session_id and first["header"]["cwd"] == str(tmp_path)
    )
