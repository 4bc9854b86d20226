from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from dsh.bash import LocalExecutor
from dsh.session import SESSIONS, TOOLS, AgentRef, ToolExecution
from dsh.tool_bash import ShellTool
from tests.helpers import harness

needs_pwsh = pytest.mark.skipif(
    shutil.which("pwsh") is None, reason="needs the pwsh binary (PowerShell), not installable here"
)


def test_request_and_spec_without_the_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_STALE", "outer")
    monkeypatch.setenv("TERM", "xterm")
    runtime = harness(tmp_path)
    try:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        tool = runtime.ctx.require(TOOLS).get("pwsh")
        assert isinstance(tool, ShellTool)
        execution = ToolExecution("pwsh", "p1", agent=AgentRef("main", session.header))
        request = tool.request({"command": "Get-ChildItem env:", "env": {"DSH_X": "spoof"}}, execution)
        assert request.shell == "pwsh" and request.env == {}
        assert request.dsh_env["DSH_SESSION_ID"] == session.id
        spec = LocalExecutor().spec(request)
        assert spec.argv == ("pwsh", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", "Get-ChildItem env:")
        assert "TERM" not in spec.env and "DSH_STALE" not in spec.env
        assert {k for k in spec.env if k.startswith("DSH_")} == set(request.dsh_env)
    finally:
        runtime.close()


def test_missing_binary_is_a_clear_error_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("pwsh") is not None:
        pytest.skip("pwsh is installed here; this checks the message when it is not")
    runtime = harness(tmp_path)
    try:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        tool = runtime.ctx.require(TOOLS).get("pwsh")
        assert tool is not None
        result = asyncio.run(tool({"command": "echo"}, ToolExecution("pwsh", "p", agent=AgentRef("m", session.header))))
        assert result.is_error and result.output == "shell 'pwsh' was not found on PATH"
    finally:
        runtime.close()


@needs_pwsh
def test_pwsh_child_sees_its_session(tmp_path: Path) -> None:
    runtime = harness(tmp_path)
    try:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        tool = runtime.ctx.require(TOOLS).get("pwsh")
        assert tool is not None
        result = asyncio.run(
            tool(
                {"command": "Write-Output $env:DSH_SESSION_ID"},
                ToolExecution("pwsh", "p", agent=AgentRef("m", session.header)),
            )
        )
        assert result.data["stdout"].strip() == session.id
    finally:
        runtime.close()
