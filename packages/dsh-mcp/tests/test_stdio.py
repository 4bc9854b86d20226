"""``dsh mcp`` as a client meets it: the SDK's own stdio client and a real server process (``python -m dsh.mcp``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from dsh.harness import Harness

pytestmark = pytest.mark.integration


def _env(home: Path) -> dict[str, str]:
    return {"DSH_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}


@asynccontextmanager
async def _connect(home: Path, *args: str, cwd: Path | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "dsh.mcp", *args], env=_env(home), cwd=cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 90))


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content)


def _events(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_lists_the_deployments_shell_tools_exactly_as_its_registry_specs_them(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def listed() -> dict[str, Any]:
        async with _connect(home) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = _run(listed())
    with Harness(env={"DSH_HOME": str(home)}) as harness:
        expected = {t["name"]: t for t in harness.anthropic_tools() if t["name"].startswith("bash")}
    assert sorted(tools) == ["bash", "bash_output", "bash_stop"] == sorted(expected)
    for name, tool in tools.items():
        assert tool.input_schema == expected[name]["input_schema"]
        assert tool.description == expected[name]["description"]


def test_a_call_runs_in_the_connections_session_and_the_transcript_records_it(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    probe = 'printf "%s\\n" "$DSH_SESSION_ID" "$DSH_SESSION_JSONL" "$DSH_HOME" "$DSH_SHELL" "$DSH_TOOL_CALL_ID" "$PWD"'

    async def calls() -> list[Any]:
        async with _connect(home, "--cwd", str(work)) as client:
            return [await client.call_tool("bash", {"command": probe}) for _ in range(2)]

    first, second = _run(calls())
    assert not first.is_error, _text(first)
    session_id, jsonl, dsh_home, shell, call_id, cwd = _text(first).splitlines()[:6]
    assert (dsh_home, shell, cwd) == (str(home), "1", str(work))
    assert _text(second).splitlines()[0] == session_id  # one connection, one session
    events = _events(jsonl)
    assert events[0]["header"]["id"] == session_id and events[0]["header"]["cwd"] == str(work)
    calls_made = [e["data"] for e in events if e["type"] == "tool/call"]
    assert [c["name"] for c in calls_made] == ["bash", "bash"]
    assert calls_made[0]["call_id"] == call_id and call_id.startswith("mcp-")
    assert calls_made[0]["arguments"] == {"command": probe}
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert results[0]["call_id"] == call_id and results[0]["data"]["exit_code"] == 0
    starts = [e["data"] for e in events if e["type"] == "turn/start"]
    assert [s["source"] for s in starts] == ["mcp", "mcp"]  # a turn per call that overlaps no other


def test_a_traceparent_in_a_calls_meta_is_continued_by_that_calls_child(tmp_path: Path) -> None:
    home = tmp_path / "home"
    handed = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    probe = 'echo "${TRACEPARENT-unset} ${TRACESTATE-unset}"'

    async def calls() -> list[str]:
        async with _connect(home) as client:
            meta: Any = {"traceparent": handed, "tracestate": "vendor=abc"}
            traced = await client.call_tool("bash", {"command": probe}, meta=meta)
            plain = await client.call_tool("bash", {"command": probe})
            return [_text(traced).split("[exit")[0].strip(), _text(plain).split("[exit")[0].strip()]

    traced, plain = _run(calls())
    parent, state = traced.split()
    assert parent.split("-")[1] == "0af7651916cd43dd8448eb211c80319c" and parent != handed
    assert state == "vendor=abc"
    # A call without one is in the connection's own trace, never the other call's.
    assert plain.split()[0].split("-")[1] != "0af7651916cd43dd8448eb211c80319c"


def test_a_second_connection_with_session_resumes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def once(*args: str) -> str:
        async with _connect(home, *args) as client:
            return _text(await client.call_tool("bash", {"command": 'echo "$DSH_SESSION_ID $DSH_TURN_ID"'}))

    made, turn = _run(once()).split()[:2]
    resumed, resumed_turn = _run(once("--session", made)).split()[:2]
    assert resumed == made and turn.endswith(":turn-1") and resumed_turn.endswith(":turn-2")


def test_a_blocking_pre_tool_use_hook_from_the_deployment_file_is_an_error_result(tmp_path: Path) -> None:
    home, marker = tmp_path / "home", tmp_path / "ran"
    hooks = tmp_path / "hooks.json"
    deny = "echo 'no shell for you' >&2; exit 2"
    hooks.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": deny}]}]}})
    )
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text(f"plugins:\n  - {{id: hooks, config: {{claude: {hooks}}}}}\n")
    for path in (hooks, deployment):
        path.chmod(0o600)

    async def call() -> Any:
        async with _connect(home, "--deployment", str(deployment)) as client:
            return await client.call_tool("bash", {"command": f"touch {marker}"})

    result = _run(call())
    assert result.is_error and _text(result) == "blocked by a PreToolUse hook: no shell for you"
    assert not marker.exists()


def test_a_hook_file_that_changed_mid_connection_refuses_every_call_until_a_reconnect(tmp_path: Path) -> None:
    home, marker = tmp_path / "home", tmp_path / "ran"
    home.mkdir(mode=0o700)

    async def calls() -> tuple[Any, Any, Any]:
        async with _connect(home) as client:
            before = await client.call_tool("bash", {"command": "echo before"})
            (home / "hooks").mkdir(mode=0o700)
            guard = home / "hooks" / "claude.json"
            deny = [{"matcher": "Bash", "hooks": [{"type": "command", "command": "exit 2"}]}]
            guard.write_text(json.dumps({"hooks": {"PreToolUse": deny}}))
            guard.chmod(0o600)
            stale = await client.call_tool("bash", {"command": f"touch {marker}"})
        async with _connect(home) as client:  # a new connection boots the files as they are
            fresh = await client.call_tool("bash", {"command": f"touch {marker}"})
        return before, stale, fresh

    before, stale, fresh = _run(calls())
    assert not before.is_error and _text(before).startswith("before\n")
    assert stale.is_error and "changed since this connection opened; nothing ran" in _text(stale), _text(stale)
    assert fresh.is_error and _text(fresh).startswith("blocked by a PreToolUse hook"), _text(fresh)
    assert not marker.exists()


def test_a_command_past_its_timeout_is_killed_and_reported(tmp_path: Path) -> None:
    async def call() -> tuple[Any, float]:
        async with _connect(tmp_path / "home") as client:
            started = time.monotonic()
            result = await client.call_tool("bash", {"command": "echo before; sleep 30", "timeout": 1})
            return result, time.monotonic() - started

    result, took = _run(call())
    assert result.is_error and took < 10
    assert _text(result).splitlines() == ["before", "[timed out: the process group was killed]", "[exit code: 124]"]


def test_background_companions_run_and_stop_a_task(tmp_path: Path) -> None:
    async def calls() -> tuple[str, str, str]:
        async with _connect(tmp_path / "home") as client:
            started = await client.call_tool("bash", {"command": "echo up; sleep 30", "run_in_background": True})
            task = _text(started).split()[3].rstrip(";")  # "started background task ID; ..."
            await asyncio.sleep(0.5)
            output = await client.call_tool("bash_output", {"task_id": task})
            stopped = await client.call_tool("bash_stop", {"task_id": task})
            return task, _text(output), _text(stopped)

    task, output, stopped = _run(calls())
    assert output == f"up\n[{task} running]"
    assert stopped == f"[{task} exited with code {128 + signal.SIGTERM}]"


def _raw_server(home: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "dsh.mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **_env(home)},
    )


def _ask(server: subprocess.Popen[bytes], line: bytes) -> dict[str, Any]:
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(line + b"\n")
    server.stdin.flush()
    answer: dict[str, Any] = json.loads(server.stdout.readline())
    return answer


def test_a_malformed_request_gets_a_json_rpc_error_and_the_server_goes_on(tmp_path: Path) -> None:
    server = _raw_server(tmp_path / "home")
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        opened = _ask(server, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        assert opened["result"]["serverInfo"]["name"] == "dsh"
        assert server.stdin is not None
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        parse = _ask(server, b'{"jsonrpc": "2.0", "id": 2, "method": \xff\xfe tools/list')
        assert parse == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": parse["error"]["message"]}}
        assert parse["error"]["message"].startswith("Parse error")
        invalid = _ask(server, b'{"jsonrpc": "1.0", "id": 3, "method": 7}')
        assert invalid["id"] is None and invalid["error"]["code"] == -32600
        # Ids JSON-RPC refuses: the SDK read these as notifications and never answered.
        for bad in (b"true", b"1.5", b'{"a": 1}', b"[1]"):
            refused = _ask(server, b'{"jsonrpc": "2.0", "id": ' + bad + b', "method": "ping"}')
            assert refused["id"] is None and refused["error"]["code"] == -32600, bad
        # A line past the 64 MiB bound is one parse error, not one per piece of it.
        too_long = _ask(server, b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "pad": "' + b"x" * (65 << 20) + b'"}')
        assert too_long["id"] is None and too_long["error"]["code"] == -32700
        assert _ask(server, b'{"jsonrpc": "2.0", "id": 6, "method": "ping"}') == {
            "jsonrpc": "2.0",
            "id": 6,
            "result": {},
        }
        call = {"name": "bash", "arguments": {"command": "echo still here"}}
        answer = _ask(server, json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call}).encode())
        assert answer["id"] == 4 and answer["result"]["content"][0]["text"].startswith("still here\n")
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(30)
    assert server.returncode == 0


def test_a_closed_stdin_is_one_line_before_anything_is_served(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh.mcp"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, **_env(tmp_path / "home")},
        preexec_fn=lambda: os.close(0),
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert (
        done.stderr
        == "dsh: dsh mcp: standard input is not open; an MCP client starts dsh mcp with pipes on its stdin and stdout\n"
    )


def test_a_client_pipe_that_cannot_take_an_answer_is_one_line_naming_it(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux) to fill stdout")
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "dsh.mcp"],
            input=json.dumps(hello) + "\n",
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **_env(tmp_path / "home")},
            timeout=60,
        )
    assert (done.returncode, done.stderr) == (
        1,
        "dsh: dsh mcp: the connection to the client (stdin and stdout) failed: No space left on device\n",
    )


CLIENT = textwrap.dedent(
    """
    import asyncio, sys
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "dsh.mcp"], env=dict(
            DSH_HOME=sys.argv[1], PYTHONPATH=sys.argv[2]))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await client.call_tool("bash", {"command": sys.argv[3]})

    asyncio.run(main())
    """
)


def test_the_client_vanishing_mid_call_kills_the_commands_group_and_records_the_turn(tmp_path: Path) -> None:
    home, facts = tmp_path / "home", tmp_path / "facts"
    # The shell writes its own pid, the server's (its parent), the transcript, then waits on a sleep.
    command = f'sleep 30 & echo "$! $PPID $DSH_SESSION_JSONL" > {facts}.tmp; mv {facts}.tmp {facts}; wait'
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(home), os.pathsep.join(sys.path), command], stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not facts.exists():
            assert client.poll() is None and time.monotonic() < deadline, "the call never started"
            time.sleep(0.05)
        sleep_pid, server_pid, jsonl = facts.read_text().split()
        client.send_signal(signal.SIGKILL)  # no goodbye: the server reads EOF with the call running
        client.wait(10)
        assert _gone(int(sleep_pid), 10), "the command's process group outlived the client"
        assert _gone(int(server_pid), 20), "dsh mcp did not end when its client went"
    finally:
        if client.poll() is None:
            client.kill()
    events = _events(jsonl)
    (result,) = [e["data"] for e in events if e["type"] == "tool/result"]
    assert result["name"] == "bash" and result["is_error"]
    ends = [e["data"] for e in events if e["type"] == "turn/end"]
    assert ends[0]["interrupted"] == "cancelled"


def test_overlapping_calls_share_one_turn(tmp_path: Path) -> None:
    async def calls() -> list[str]:
        async with _connect(tmp_path / "home") as client:
            slow = client.call_tool("bash", {"command": 'sleep 1; echo "slow $DSH_TURN_ID $DSH_SESSION_JSONL"'})
            fast = client.call_tool("bash", {"command": 'echo "fast $DSH_TURN_ID"'})
            return [_text(r).split("\n")[0] for r in await asyncio.gather(slow, fast)]

    slow, fast = _run(calls())
    assert slow.split()[1] == fast.split()[1]  # one turn
    events = _events(slow.split()[2])
    assert [e["type"] for e in events if e["type"].startswith("turn/")] == ["turn/start", "turn/end"]
    assert [e["data"]["name"] for e in events if e["type"] == "tool/result"] == ["bash", "bash"]


def test_sigterm_kills_the_running_command_records_the_turn_and_exits_143(tmp_path: Path) -> None:
    facts = tmp_path / "facts"
    server = _raw_server(tmp_path / "home")
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        _ask(server, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        assert server.stdin is not None
        command = f'sleep 30 & echo "$! $DSH_SESSION_JSONL" > {facts}.tmp; mv {facts}.tmp {facts}; wait'
        call = {"name": "bash", "arguments": {"command": command}}
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}).encode())
        server.stdin.write(b"\n")
        server.stdin.flush()
        deadline = time.monotonic() + 60
        while not facts.exists():
            assert server.poll() is None and time.monotonic() < deadline, "the call never started"
            time.sleep(0.05)
        sleep_pid, jsonl = facts.read_text().split()
        server.send_signal(signal.SIGTERM)
        assert server.wait(20) == 128 + signal.SIGTERM
        assert _gone(int(sleep_pid), 5)
    finally:
        if server.poll() is None:
            server.kill()
    ends = [e["data"] for e in _events(jsonl) if e["type"] == "turn/end"]
    assert ends[0]["interrupted"] == "cancelled"


def test_a_session_another_connection_holds_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def both() -> subprocess.CompletedProcess[str]:
        async with _connect(home) as client:
            held = _text(await client.call_tool("bash", {"command": "echo $DSH_SESSION_ID"})).split()[0]
            return await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "dsh.mcp", "--session", held],
                input="",
                capture_output=True,
                text=True,
                env={**os.environ, **_env(home)},
                timeout=60,
            )

    refused = _run(both())
    assert refused.returncode == 1 and refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1 and "is being written by" in refused.stderr, refused.stderr
