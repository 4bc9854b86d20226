"""The ``bash`` tool through its plugin: specs, argument checks, real calls, background tasks, unloading."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import dsh.loader
from dsh.bash import SHELL_EXECUTOR, BashExecRequest, ExecResult, LocalExecutor, run_blocking
from dsh.bash_env import BASH_ENV, FunctionContributor
from dsh.bash_env import plugin as bash_env_plugin
from dsh.core import Fiber, FiberState
from dsh.session import DSH_HOME, TOOLS, AgentRef, SessionHeader, ToolExecution, ToolResult, tools_plugin
from dsh.tool_bash import ShellTool
from dsh.tool_bash import plugin as tool_bash_plugin


class Harness:
    """A kernel with the tool registry, bash-env and one ``tool-bash`` plugin, over a fresh home."""

    def __init__(
        self, tmp_path: Path, config: Mapping[str, Any] | None = None, executor: LocalExecutor | None = None
    ) -> None:
        self.home = tmp_path / "home"
        self.cwd = tmp_path / "project"
        self.cwd.mkdir()
        self.root = dsh.loader.root()
        self.root.provide(DSH_HOME, self.home)
        self.root.provide(SHELL_EXECUTOR, executor or LocalExecutor(spill_dir=tmp_path / "output"))
        self.root.plugin(tools_plugin)
        self.root.plugin(bash_env_plugin, {"entry_points": False})
        self.fiber: Fiber = self.root.plugin(tool_bash_plugin, dict(config or {}))
        assert self.fiber.state is FiberState.ACTIVE, self.fiber.error
        self.header = SessionHeader(id="sess-1", cwd=str(self.cwd))
        self.calls = 0

    def tool(self, name: str = "bash") -> Any:
        tool = self.root.require(TOOLS).get(name)
        assert tool is not None, name
        return tool

    def execution(self, *, agent: bool = True) -> ToolExecution:
        self.calls += 1
        ref = AgentRef("main", self.header) if agent else None
        return ToolExecution("bash", f"call-{self.calls}", agent=ref, turn_id="sess-1:turn-1")

    def call(self, arguments: Mapping[str, Any], name: str = "bash") -> ToolResult:
        result: ToolResult = asyncio.run(self.tool(name)(arguments, self.execution()))
        return result


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_the_plugin_registers_the_tool_and_its_companions_with_strict_schemas(tmp_path: Path) -> None:
    harness = Harness(tmp_path, {"max_timeout": 30})
    specs = harness.root.require(TOOLS).specs()
    assert [s.name for s in specs] == ["bash", "bash_output", "bash_stop"]
    bash = specs[0].parameters
    assert bash["required"] == ["command"] and bash["additionalProperties"] is False
    assert set(bash["properties"]) == {"command", "description", "timeout", "workdir", "run_in_background"}
    assert "(max 30)" in bash["properties"]["timeout"]["description"]
    for companion in specs[1:]:
        assert companion.parameters["required"] == ["task_id"]
        assert companion.parameters["additionalProperties"] is False
    assert [e.label for e in harness.fiber.effects] == [
        "tool bash",
        "tool bash_output",
        "tool bash_stop",
        "bash background tasks",
    ]


def test_a_second_bash_tool_fails_naming_both_plugins(harness: Harness) -> None:
    again = harness.root.plugin(tool_bash_plugin, {}, label="tool-bash-2")
    assert again.state is FiberState.FAILED
    assert "tool 'bash' is already registered by plugin 'tool-bash'; plugin 'tool-bash-2'" in (again.error or "")
    assert harness.call({"command": "echo still here"}).output.startswith("still here")


def test_unloading_the_plugin_removes_its_tools(harness: Harness) -> None:
    harness.fiber.dispose()
    assert harness.root.require(TOOLS).specs() == []


def test_a_call_runs_with_the_managed_snapshot_and_reports_the_exit_code(harness: Harness) -> None:
    result = harness.call({"command": 'echo "$DSH_HOME"; pwd; echo oops >&2; exit 3'})
    assert result.is_error and not result.blocked
    assert result.output == f"{harness.home.absolute()}\n{harness.cwd}\n[stderr]\noops\n[exit code: 3]"
    assert result.data["exit_code"] == 3 and result.value is not None


def test_arguments_the_schema_does_not_name_never_reach_the_child(harness: Harness) -> None:
    result = harness.call({"command": 'echo "${INJECTED-unset}"; cat', "env": {"INJECTED": "yes"}, "stdin": "smuggled"})
    assert not result.is_error and result.output == "unset\n[exit code: 0]"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "argument 'command' must be a non-blank string"),
        ({"command": "   "}, "argument 'command' must be a non-blank string"),
        ({"command": ["touch", "x"]}, "argument 'command' must be a non-blank string"),
        ({"command": "touch x", "timeout": 0}, "argument 'timeout' must be a positive number of seconds, not 0"),
        ({"command": "touch x", "timeout": -5}, "argument 'timeout' must be a positive number of seconds, not -5"),
        ({"command": "touch x", "timeout": math.nan}, "not nan"),
        ({"command": "touch x", "timeout": math.inf}, "not inf"),
        ({"command": "touch x", "timeout": True}, "not True"),
        ({"command": "touch x", "timeout": "10"}, "not '10'"),
        ({"command": "touch x", "workdir": 7}, "argument 'workdir' must be a string"),
        (
            {"command": "touch x", "run_in_background": "yes"},
            "argument 'run_in_background' must be a boolean, not 'yes'",
        ),
        ({"command": "touch x", "description": 5}, "argument 'description' must be a string, not 5"),
    ],
)
def test_bad_arguments_are_an_error_result_and_nothing_runs(
    harness: Harness, arguments: dict[str, Any], message: str
) -> None:
    result = harness.call(arguments)
    assert result.is_error and message in result.output
    assert result.data == {"error": result.output}
    assert not (harness.cwd / "x").exists()


def test_timeouts_default_and_are_capped_by_the_config(tmp_path: Path) -> None:
    harness = Harness(tmp_path, {"default_timeout": 7, "max_timeout": 20})
    tool: ShellTool = harness.tool()
    execution = harness.execution()
    assert tool.request({"command": "true"}, execution, {}).timeout == 7
    assert tool.request({"command": "true", "timeout": 2.5}, execution, {}).timeout == 2.5
    assert tool.request({"command": "true", "timeout": 10_000}, execution, {}).timeout == 20


def test_a_call_past_its_timeout_is_killed_and_reported(harness: Harness) -> None:
    result = harness.call({"command": "echo started; sleep 30", "timeout": 0.5})
    assert result.is_error and result.data["exit_code"] == 124 and result.data["timed_out"] is True
    assert result.output == "started\n[timed out: the process group was killed]\n[exit code: 124]"


def test_an_invalid_config_fails_the_plugin_naming_the_field(tmp_path: Path) -> None:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path)
    root.plugin(tools_plugin)
    root.plugin(bash_env_plugin, {"entry_points": False})
    fiber = root.plugin(tool_bash_plugin, {"max_timeout": 0})
    assert fiber.state is FiberState.FAILED and "max_timeout" in (fiber.error or "")


def test_workdir_is_relative_to_the_session_and_a_missing_one_is_named(harness: Harness) -> None:
    (harness.cwd / "sub").mkdir()
    assert harness.call({"command": "pwd", "workdir": "sub"}).output == f"{harness.cwd / 'sub'}\n[exit code: 0]"
    assert harness.call({"command": "pwd", "workdir": "/"}).output == "/\n[exit code: 0]"
    missing = harness.call({"command": "pwd", "workdir": "nope"})
    assert missing.is_error and str(harness.cwd / "nope") in missing.output


def test_a_failing_contributor_fails_the_call_naming_it_and_nothing_runs(harness: Harness) -> None:
    def broken(execution: ToolExecution) -> Mapping[str, str]:
        raise RuntimeError("no region today")

    harness.root.require(BASH_ENV).register(FunctionContributor("region", {"DSH_REGION": "The region."}, broken))
    result = harness.call({"command": "touch x"})
    assert result.is_error and "region" in result.output and "no region today" in result.output
    assert not (harness.cwd / "x").exists()


def test_background_tasks_are_read_stopped_and_named(harness: Harness) -> None:
    async def scenario() -> tuple[ToolResult, ...]:
        started = await harness.tool()(
            {"command": "echo first; sleep 30", "run_in_background": True}, harness.execution()
        )
        task_id = started.data["task_id"]
        for _ in range(100):
            read = await harness.tool("bash_output")({"task_id": task_id}, harness.execution())
            if "first" in read.output:
                break
            await asyncio.sleep(0.05)
        stopped = await harness.tool("bash_stop")({"task_id": task_id}, harness.execution())
        unknown = await harness.tool("bash_output")({"task_id": "task-nope"}, harness.execution())
        return started, read, stopped, unknown

    started, read, stopped, unknown = asyncio.run(scenario())
    task_id = started.data["task_id"]
    assert started.output == f"started background task {task_id}; read it with bash_output"
    assert read.output == f"first\n[{task_id} running]" and read.data["exit_code"] is None
    assert stopped.data["exit_code"] is not None and f"[{task_id} exited with code" in stopped.output
    assert unknown.is_error and unknown.output == f"no background task 'task-nope'; known tasks: {task_id}"


def test_unloading_the_plugin_kills_its_background_tasks(harness: Harness, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    async def scenario() -> int | None:
        tool: ShellTool = harness.tool()
        command = f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; exec sleep 30"
        await tool({"command": command, "run_in_background": True}, harness.execution())
        (task,) = tool.tasks.tasks.values()
        for _ in range(200):
            if pid_file.exists():
                break
            await asyncio.sleep(0.05)
        harness.fiber.dispose()  # kills the group at once, without waiting
        code = await asyncio.wait_for(task.wait(), 10)
        assert tool.tasks.tasks == {}
        return code

    assert asyncio.run(scenario()) == 128 + signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_stopped_background_task_reports_128_plus_the_signal(harness: Harness) -> None:
    async def scenario() -> ToolResult:
        started = await harness.tool()({"command": "exec sleep 30", "run_in_background": True}, harness.execution())
        return await harness.tool("bash_stop")({"task_id": started.data["task_id"]}, harness.execution())

    assert asyncio.run(scenario()).data["exit_code"] == 128 + signal.SIGTERM


def test_a_plugin_without_the_registry_waits_for_it(tmp_path: Path) -> None:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path)
    fiber = root.plugin(tool_bash_plugin, {})
    assert fiber.state is FiberState.PENDING and fiber.missing == ["bash_env", "tools"]
    root.plugin(tools_plugin)
    root.plugin(bash_env_plugin, {"entry_points": False})
    assert fiber.state is FiberState.ACTIVE
    assert isinstance(root.require(TOOLS).get("bash"), ShellTool)


def test_background_output_is_cut_and_spilled_as_the_foregrounds(harness: Harness, tmp_path: Path) -> None:
    # Before: bash_output returned a task's whole output (400 MB in the issue) into the transcript.
    async def scenario() -> tuple[ToolResult, ToolResult, ToolResult]:
        started = await harness.tool()(
            {"command": "echo first; sleep 0.5; seq 1 20000", "run_in_background": True},
            harness.execution(),
        )
        task_id = started.data["task_id"]
        for _ in range(100):
            first = await harness.tool("bash_output")({"task_id": task_id}, harness.execution())
            if "first" in first.output:
                break
            await asyncio.sleep(0.02)
        tool: ShellTool = harness.tool()
        await tool.tasks.tasks[task_id].wait()
        rest = await harness.tool("bash_output")({"task_id": task_id}, harness.execution())
        again = await harness.tool("bash_output")({"task_id": task_id}, harness.execution())
        return first, rest, again

    first, rest, again = asyncio.run(scenario())
    assert first.data["stdout"] == "first\n" and "stdout_spill" not in first.data
    spill = rest.data["stdout_spill"]
    assert Path(spill).parent == tmp_path / "output"
    assert Path(spill).read_text() == "first\n" + "".join(f"{i}\n" for i in range(1, 20001))  # the whole stream
    note = f"[stdout truncated: showing the last 30000 of 108894 new characters; full text in {spill}]\n"
    assert rest.data["stdout"] == note + "".join(f"{i}\n" for i in range(1, 20001))[-30000:]
    assert rest.output.startswith(note) and rest.output.endswith(
        f"\n19999\n20000\n[{rest.data['task_id']} exited with code 0]"
    )
    assert again.data["stdout"] == "" and again.data["exit_code"] == 0


class WaitsRecorded(LocalExecutor):
    """The local executor, noting which of its two ways of waiting each call took."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(spill_dir=tmp_path / "output")
        self.waits: list[str] = []

    async def run(self, request: BashExecRequest) -> ExecResult:
        self.waits.append("run")
        return await super().run(request)

    def run_sync(self, request: BashExecRequest) -> ExecResult:
        self.waits.append("run_sync")
        return super().run_sync(request)


def test_under_an_event_loop_a_call_awaits_the_executors_run(tmp_path: Path) -> None:
    executor = WaitsRecorded(tmp_path)
    harness = Harness(tmp_path, executor=executor)
    result = harness.call({"command": 'echo "$DSH_TOOL_CALL_ID"'})
    assert (result.is_error, result.data["stdout"]) == (False, "call-1\n")
    assert executor.waits == ["run"]


def test_driven_without_an_event_loop_a_call_blocks_in_run_sync(tmp_path: Path) -> None:
    executor = WaitsRecorded(tmp_path)
    harness = Harness(tmp_path, executor=executor)
    result = run_blocking(harness.tool()({"command": 'echo "$DSH_TOOL_CALL_ID"'}, harness.execution()))
    assert (result.is_error, result.data["stdout"]) == (False, "call-1\n")
    assert executor.waits == ["run_sync"]


def test_driven_without_an_event_loop_a_background_task_is_refused_and_nothing_starts(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    harness = Harness(tmp_path)
    result = run_blocking(
        harness.tool()({"command": f"touch {marker}", "run_in_background": True}, harness.execution())
    )
    assert result.is_error and result.output == "bash: a background task needs a running event loop"
    assert not marker.exists() and harness.tool().tasks.tasks == {}


BLOCKING_CALL = """
import sys
import dsh.loader
from dsh.bash import SHELL_EXECUTOR, LocalExecutor, run_blocking
from dsh.bash_env import plugin as bash_env_plugin
from dsh.session import DSH_HOME, TOOLS, ToolExecution, tools_plugin
from dsh.tool_bash import plugin as tool_bash_plugin

root = dsh.loader.root()
root.provide(DSH_HOME, sys.argv[1])
root.provide(SHELL_EXECUTOR, LocalExecutor(spill_dir=sys.argv[1]))
root.plugin(tools_plugin)
root.plugin(bash_env_plugin, {"entry_points": False})
root.plugin(tool_bash_plugin, {})
result = run_blocking(root.require(TOOLS).get("bash")({"command": "echo ran"}, ToolExecution("bash", "call-1")))
print(result.data["stdout"].strip(), "asyncio" in sys.modules)
"""


def test_a_call_driven_without_an_event_loop_imports_no_asyncio(tmp_path: Path) -> None:
    """What keeps asyncio off a one-shot ``dsh exec``: the driver's word, not a look at ``sys.modules``."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCKING_CALL, str(tmp_path)], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["ran", "False"]
