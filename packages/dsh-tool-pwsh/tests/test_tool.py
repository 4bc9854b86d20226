"""The ``pwsh`` tool: its specs, the command line it builds, and (with ``pwsh`` installed) a real call.

The command construction is checked through a stand-in ``pwsh`` on PATH that records the argv and
environment it was started with: the tool, the request and the executor are all real.
"""

from __future__ import annotations

import asyncio
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import dsh.loader
from dsh.bash import SHELL_EXECUTOR, LocalExecutor
from dsh.bash_env import plugin as bash_env_plugin
from dsh.core import Context, FiberState
from dsh.session import DSH_HOME, TOOLS, AgentRef, SessionHeader, ToolExecution, ToolResult, tools_plugin
from dsh.tool_bash import plugin as tool_bash_plugin
from dsh.tool_pwsh import PWSH_DESCRIPTION
from dsh.tool_pwsh import plugin as tool_pwsh_plugin

RECORDER = """#!/bin/sh
# A stand-in pwsh: record how it was started, then answer like a command that printed and exited 5.
printf '%s\\0' "$@" > "$RECORD_TO.argv"
env -0 > "$RECORD_TO.env"
echo from-fake-pwsh
exit 5
"""


def _root(tmp_path: Path, *plugins: tuple[Any, Mapping[str, Any]]) -> Context:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path / "home")
    root.provide(SHELL_EXECUTOR, LocalExecutor(spill_dir=tmp_path / "output"))
    root.plugin(tools_plugin)
    root.plugin(bash_env_plugin, {"entry_points": False})
    for plugin, config in plugins:
        fiber = root.plugin(plugin, dict(config))
        assert fiber.state is FiberState.ACTIVE, fiber.error
    return root


def _call(root: Context, arguments: Mapping[str, Any], cwd: Path) -> ToolResult:
    tool = root.require(TOOLS).get("pwsh")
    assert tool is not None
    execution = ToolExecution("pwsh", "call-1", arguments, AgentRef("main", SessionHeader(id="s-1", cwd=str(cwd))))
    result: ToolResult = asyncio.run(tool(arguments, execution))
    return result


def test_the_plugin_registers_pwsh_and_its_companions_beside_bash(tmp_path: Path) -> None:
    root = _root(tmp_path, (tool_bash_plugin, {}), (tool_pwsh_plugin, {"max_timeout": 45}))
    specs = {s.name: s for s in root.require(TOOLS).specs()}
    assert sorted(specs) == ["bash", "bash_output", "bash_stop", "pwsh", "pwsh_output", "pwsh_stop"]
    pwsh = specs["pwsh"]
    assert pwsh.description == PWSH_DESCRIPTION
    assert pwsh.parameters["required"] == ["command"] and pwsh.parameters["additionalProperties"] is False
    assert "(max 45)" in pwsh.parameters["properties"]["timeout"]["description"]
    assert specs["pwsh_output"].description == "Read new output and the status of a background pwsh task."
    assert specs["pwsh_stop"].description == "Stop a background pwsh task (its whole process group)."


def test_the_description_speaks_powershell_and_never_names_a_variable() -> None:
    assert "PowerShell (pwsh)" in PWSH_DESCRIPTION and "Get-ChildItem env:DSH_*" in PWSH_DESCRIPTION
    assert "bash" not in PWSH_DESCRIPTION and "env | grep" not in PWSH_DESCRIPTION


def test_the_command_runs_as_a_non_interactive_pwsh_without_term(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pwsh"
    fake.write_text(RECORDER)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    record = tmp_path / "record"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("RECORD_TO", str(record))
    monkeypatch.setenv("TERM", "xterm-256color")
    cwd = tmp_path / "project"
    cwd.mkdir()
    root = _root(tmp_path, (tool_pwsh_plugin, {}))

    command = "Write-Output $env:DSH_HOME; exit 3"
    result = _call(root, {"command": command, "env": {"SMUGGLED": "1"}}, cwd)

    argv = Path(f"{record}.argv").read_text().split("\0")[:-1]
    env = dict(item.partition("=")[::2] for item in Path(f"{record}.env").read_text().split("\0") if item)
    assert argv == ["-NoLogo", "-NoProfile", "-NonInteractive", "-Command", command]
    assert "TERM" not in env and "SMUGGLED" not in env
    assert env["DSH_HOME"] == str((tmp_path / "home").absolute())
    assert env["DSH_SHELL"] == "1" and env["DSH_SESSION_ID"] == "s-1"
    assert result.is_error and result.output == "from-fake-pwsh\n[exit code: 5]"


def test_a_missing_pwsh_is_an_error_result_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    root = _root(tmp_path, (tool_pwsh_plugin, {}))
    result = _call(root, {"command": "Write-Output hi"}, tmp_path)
    assert result.is_error and result.output == "shell 'pwsh' was not found on PATH"


def test_bad_arguments_are_refused_before_pwsh_is_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no pwsh: a refused call never gets that far
    root = _root(tmp_path, (tool_pwsh_plugin, {}))
    result = _call(root, {"command": "Write-Output hi", "timeout": -1}, tmp_path)
    assert result.is_error and result.output == "argument 'timeout' must be a positive number of seconds, not -1"


@pytest.mark.pwsh
@pytest.mark.skipif(shutil.which("pwsh") is None, reason="needs pwsh (PowerShell) on PATH")
def test_a_real_pwsh_call_sees_the_managed_variables(tmp_path: Path) -> None:
    root = _root(tmp_path, (tool_pwsh_plugin, {}))
    result = _call(root, {"command": "Write-Output $env:DSH_SESSION_ID; exit 3"}, tmp_path)
    assert result.output == "s-1\n[exit code: 3]" and result.data["exit_code"] == 3
