"""``dsh mcp`` with the whole workspace: the SQLite backend beside it, and ``dsh --help`` kept cold."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.helpers import dsh
from tests.integration.serve_support import PARENT_PROBE, as_a_user

pytestmark = pytest.mark.integration


async def _call(home: Path, *args: str, command: str, env: dict[str, str] | None = None) -> str:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "dsh.cli", "mcp", *args],
        env={"DSH_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("bash", {"command": command})
        return "".join(getattr(block, "text", "") for block in result.content)


def _run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 90))


def test_a_sqlite_session_served_over_mcp_is_listed_and_shown_by_dsh(tmp_path: Path) -> None:
    home, deployment = tmp_path / "home", tmp_path / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    deployment.chmod(0o600)
    out = _run(
        _call(
            home,
            "--deployment",
            str(deployment),
            command='echo "$DSH_SESSION_ID ${DSH_SESSION_JSONL-unset} $DSH_TOOL_CALL_ID $DSH_DEPLOYMENT"',
        )
    )
    session_id, jsonl, call_id, chosen = out.split()[:4]
    assert (jsonl, chosen) == ("unset", str(deployment))
    listed = json.loads(dsh("sessions", "list", "--json", "--deployment", str(deployment), home=home).stdout)
    assert [s["id"] for s in listed["sessions"]] == [session_id]
    shown = json.loads(dsh("sessions", "show", session_id, "--json", "--deployment", str(deployment), home=home).stdout)
    calls = [e["data"] for e in shown["events"] if e["type"] == "tool/call"]
    assert [c["call_id"] for c in calls] == [call_id]


def test_stale_dsh_variables_of_the_client_never_reach_the_child(tmp_path: Path) -> None:
    stale = {"DSH_SESSION_ID": "outer-session", "DSH_TOOL_CALL_ID": "outer-call", "DSH_TURN_ID": "outer:turn-9"}
    out = _run(_call(tmp_path / "home", command="env | grep ^DSH_ | sort", env=stale))
    facts = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("DSH_"))
    # The outer shell is named only as the claimed parent (issue 41), never as the child's own identity.
    assert facts.pop("DSH_PARENT_SESSION_ID") == "outer-session"
    assert not [value for value in facts.values() if "outer" in value], facts
    assert {line.split("=")[0] for line in out.splitlines() if line.startswith("DSH_")} >= {
        "DSH_HOME",
        "DSH_SHELL",
        "DSH_SESSION_ID",
        "DSH_SESSION_JSONL",
        "DSH_TOOL_CALL_ID",
        "DSH_TURN_ID",
    }


HELP = """
import json, sys
from dsh.cli_fast._client import main

try:
    main(["--help"])
except SystemExit:
    pass
sys.stdout.flush()
print(json.dumps([m for m in sys.modules if m == "dsh.mcp" or m.startswith(("dsh.mcp.", "mcp"))]), file=sys.stderr)
"""


def test_dsh_help_lists_the_mcp_verb_without_importing_dsh_mcp_or_the_sdk(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    done = subprocess.run(
        [sys.executable, "-c", HELP], capture_output=True, text=True, env={**env, "DSH_HOME": str(tmp_path / "h")}
    )
    assert json.loads(done.stderr.splitlines()[-1]) == []
    (line,) = [line for line in done.stdout.splitlines() if line.strip().startswith("mcp ")]
    assert "Model" in done.stdout and "(dsh-mcp)" in done.stdout, line


async def _probe(home: Path, probe: Path) -> str:
    prefix = as_a_user()
    params = StdioServerParameters(
        command=prefix[0] if prefix else sys.executable,
        args=[*prefix[1:], *([sys.executable] if prefix else []), "-m", "dsh.cli", "mcp"],
        env={"DSH_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("bash", {"command": f"bash {probe} $PPID"})
        return "".join(getattr(block, "text", "") for block in result.content)


def test_a_command_cannot_reach_the_protocol_through_the_servers_proc(tmp_path: Path) -> None:
    # Before: it opened /proc/$PPID/fd/7 (the real stdout) and forged the answer the client read.
    probe = tmp_path / "probe.sh"
    probe.write_text(PARENT_PROBE)
    out = _run(_probe(tmp_path / "home", probe))
    assert out.startswith("probed\n"), out
