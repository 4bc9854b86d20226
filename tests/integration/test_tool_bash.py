from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, ExecResult
from dsh.loader import Runtime
from dsh.session import SESSIONS, TOOLS, AgentRef, Session, ToolExecution, ToolResult
from tests.helpers import BAD_CONTRIBUTOR_PLUGINS, harness


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = harness(tmp_path)
    yield rt
    rt.close()


def _call(
    runtime: Runtime, session: Session, arguments: dict[str, object], tool: str = "bash", call_id: str = "c"
) -> ToolResult:
    bash = runtime.ctx.require(TOOLS).get(tool)
    assert bash is not None
    execution = ToolExecution(tool, call_id, arguments, agent=AgentRef("main", session.header))
    return asyncio.run(bash(arguments, execution))  # type: ignore[arg-type]


def test_tools_are_registered_with_companions(runtime: Runtime) -> None:
    names = [s.name for s in runtime.ctx.require(TOOLS).specs()]
    assert {"bash", "bash_output", "bash_stop", "pwsh", "pwsh_output", "pwsh_stop", "spawn_agent"} <= set(names)


def test_model_env_and_stdin_are_ignored_in_the_foreground(runtime: Runtime, tmp_path: Path) -> None:
    session = runtime.ctx.require(SESSIONS).create(tmp_path)
    result = _call(
        runtime,
        session,
        {
            "command": 'read -t 1 line; echo "id=$DSH_SESSION_ID stdin=${line:-none} x=${EXTRA:-unset}"',
            "env": {"DSH_SESSION_ID": "spoofed", "EXTRA": "1"},
            "stdin": "evil\n",
        },
    )
    assert result.data["stdout"] == f"id={session.id} stdin=none x=unset\n"


def test_model_env_is_ignored_in_the_background(runtime: Runtime, tmp_path: Path) -> None:
    session = runtime.ctx.require(SESSIONS).create(tmp_path)

    async def scenario() -> str:
        tools = runtime.ctx.require(TOOLS)
        execution = ToolExecution("bash", "bg", agent=AgentRef("main", session.header))
        args = {
            "command": 'echo "id=$DSH_SESSION_ID j=$DSH_SESSION_JSONL"',
            "run_in_background": True,
            "env": {"DSH_SESSION_ID": "spoofed"},
            "stdin": "x",
        }
        started = await tools.get("bash")(args, execution)  # type: ignore[misc]
        task_id = started.data["task_id"]
        output = ""
        for _ in range(100):
            read = await tools.get("bash_output")({"task_id": task_id}, execution)  # type: ignore[misc]
            output += read.data["stdout"]
            if read.data["exit_code"] is not None:
                break
            await asyncio.sleep(0.02)
        return output

    location = session.locate()
    assert location is not None
    assert asyncio.run(scenario()) == f"id={session.id} j={location.path}\n"


def test_each_call_collects_a_fresh_snapshot(runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = runtime.ctx.require(SESSIONS).create(tmp_path)
    seen: list[BashExecRequest] = []
    executor = runtime.ctx.get("shell_executor")
    original = executor.run

    async def recording(request: BashExecRequest) -> ExecResult:
        seen.append(request)
        return await original(request)  # type: ignore[no-any-return]

    monkeypatch.setattr(executor, "run", recording)
    _call(runtime, session, {"command": "true"})
    _call(runtime, session, {"command": "true"})
    assert seen[0].dsh_env == seen[1].dsh_env and seen[0].dsh_env is not seen[1].dsh_env
    assert seen[0].env == {} and seen[0].stdin is None
    assert seen[0].cwd == str(tmp_path)


def test_parent_and_child_overlapping_calls_see_only_their_own_identity(runtime: Runtime, tmp_path: Path) -> None:
    store = runtime.ctx.require(SESSIONS)
    parent = store.create(tmp_path)
    child = store.spawn(parent.header)
    tools = runtime.ctx.require(TOOLS)
    bash = tools.get("bash")
    assert bash is not None

    async def one(session: Session, n: int) -> tuple[str, str]:
        execution = ToolExecution("bash", f"{session.id}-{n}", agent=AgentRef("a", session.header))
        result = await bash(
            {"command": 'sleep 0.0$((RANDOM % 5)); echo "$DSH_SESSION_ID $DSH_SESSION_JSONL"'}, execution
        )
        return session.id, result.data["stdout"]

    async def scenario() -> list[tuple[str, str]]:
        return await asyncio.gather(*(one(s, n) for n in range(20) for s in (parent, child)))

    results = asyncio.run(scenario())
    assert len(results) == 40
    paths = {s.id: s.locate().path for s in (parent, child)}  # type: ignore[union-attr]
    assert paths[parent.id] != paths[child.id]
    for session_id, stdout in results:
        assert stdout == f"{session_id} {paths[session_id]}\n"


def test_collection_failure_is_an_error_result_naming_contributor_and_key(tmp_path: Path) -> None:
    rt = harness(tmp_path, plugins=BAD_CONTRIBUTOR_PLUGINS)
    try:
        session = rt.ctx.require(SESSIONS).create(tmp_path)
        result = _call(rt, session, {"command": "echo never"})
        assert result.is_error
        assert result.output == "contributor 'bad' returned undeclared key 'DSH_NOT_DECLARED'"
    finally:
        rt.close()


def test_bad_arguments_are_error_results(runtime: Runtime, tmp_path: Path) -> None:
    session = runtime.ctx.require(SESSIONS).create(tmp_path)
    assert _call(runtime, session, {"command": " "}).output == "argument 'command' must be a non-blank string"
    assert "argument 'timeout'" in _call(runtime, session, {"command": "true", "timeout": "soon"}).output
    for bad in (-5, 0, float("nan"), float("inf")):
        out = _call(runtime, session, {"command": "true", "timeout": bad}).output
        assert out == f"argument 'timeout' must be a positive number of seconds, not {bad!r}"
    assert "no background task" in _call(runtime, session, {"task_id": "nope"}, tool="bash_output").output


def test_timeout_argument_kills_the_command(runtime: Runtime, tmp_path: Path) -> None:
    session = runtime.ctx.require(SESSIONS).create(tmp_path)
    result = _call(runtime, session, {"command": "sleep 20", "timeout": 0.3})
    assert result.is_error and result.data["timed_out"] is True


def test_relative_workdir_is_under_the_session_cwd(runtime: Runtime, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    session = runtime.ctx.require(SESSIONS).create(tmp_path)
    assert _call(runtime, session, {"command": "pwd", "workdir": "sub"}).data["stdout"] == f"{tmp_path / 'sub'}\n"
