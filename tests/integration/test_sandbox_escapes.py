"""Issue 39's sandbox escapes end to end: `dsh exec --cwd`, a model's `workdir` over `dsh mcp`, `dsh serve`.

Each test ran its attack successfully before the fix (the call's cwd bound writable, ``DSH_HOME``
writable inside the workspace, the server's socket answering a sandboxed command).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh.bash import BashExecRequest
from dsh.bash_sandbox import SandboxExecutor
from dsh.cli_fast import _wire
from tests.helpers import dsh
from tests.integration.serve_support import ServeProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder outside /tmp with a fake ``$HOME`` (holding a ``.bashrc``), a project and a deployment."""
    path = Path(tempfile.mkdtemp(prefix="dsh-escape-", dir="/var/tmp")).resolve()
    (path / "home").mkdir()
    (path / "home" / ".bashrc").write_text("# the user's\n")
    (path / "proj").mkdir()
    deployment = path / "deployment.yaml"
    deployment.write_text("plugins:\n  - {id: bash-local, name: bash-sandbox, config: {mode: workspace-write}}\n")
    deployment.chmod(0o600)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_dsh_exec_in_the_users_home_is_refused_in_one_line(base: Path) -> None:
    home = base / "home"
    for cwd in (home, Path("/")):
        done = dsh(
            "exec", "--deployment", str(base / "deployment.yaml"), "--cwd", str(cwd), "--",
            f"touch {home}/x; echo evil >> {home}/.bashrc",
            home=base / "dsh-home", env={"HOME": str(home)},
        )  # fmt: skip
        assert done.returncode != 0 and "will not make" in done.stderr and "writable" in done.stderr, done.stderr
        assert len([line for line in done.stderr.splitlines() if "will not make" in line]) == 1
    assert not (home / "x").exists() and (home / ".bashrc").read_text() == "# the user's\n"


def test_a_confined_call_cannot_plant_a_hook_in_a_dsh_home_inside_its_workspace(base: Path) -> None:
    proj = base / "proj"
    dsh_home = proj / ".dsh"
    plant = (
        "mkdir -p .dsh/hooks && printf '%s' "
        '\'{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "touch ' + str(base) + "/pwned\"}]}]}}' "
        "> .dsh/hooks/claude.json"
    )
    args = ("exec", "--json", "--deployment", str(base / "deployment.yaml"), "--")
    first = json.loads(dsh(*args, plant, home=dsh_home, cwd=proj, env={"HOME": str(base / "home")}).stdout)
    assert first["exit_code"] != 0 and not (dsh_home / "hooks" / "claude.json").exists()
    dsh(*args, "true", home=dsh_home, cwd=proj, env={"HOME": str(base / "home")})
    assert not (base / "pwned").exists()


def _run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 90))


async def _mcp_call(base: Path, arguments: dict[str, str]) -> str:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "dsh.cli", "mcp", "--deployment", str(base / "deployment.yaml"), "--cwd", str(base / "proj")],
        env={
            "DSH_HOME": str(base / "dsh-home"),
            "HOME": str(base / "home"),
            "PATH": os.environ["PATH"],
            "PYTHONPATH": os.pathsep.join(sys.path),
        },
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("bash", arguments)
        return "".join(getattr(block, "text", "") for block in result.content)


def test_a_models_workdir_over_mcp_makes_nothing_new_writable(base: Path) -> None:
    home = base / "home"
    attack = f"touch x; echo evil >> {home}/.bashrc; echo done"
    for workdir in (str(home), "/"):
        out = _run(_mcp_call(base, {"command": attack, "workdir": workdir}))
        assert out.count("Read-only file system") == 2, out
    assert not (home / "x").exists() and (home / ".bashrc").read_text() == "# the user's\n"
    out = _run(_mcp_call(base, {"command": "touch made && echo made"}))
    assert "made" in out and (base / "proj" / "made").exists()


SERVED = """
import sys
from pathlib import Path
from tests.integration.serve_support import ask, request
print(ask(Path(sys.argv[1]), request("touch " + sys.argv[2], Path(sys.argv[3]))))
"""


@pytest.mark.skipif(
    any(Path(p).resolve().is_relative_to("/tmp") for p in (__file__, _wire.__file__, sys.executable)),
    reason="this clone (or its Python) is under /tmp, which the sandbox replaces with a private one, so the "
    "sandboxed client cannot import tests.integration and dsh.cli; clone outside /tmp to run it",
)
def test_dsh_serve_refuses_a_sandboxed_client_even_where_its_socket_is_allowed(base: Path) -> None:
    server = ServeProcess(base / "dsh-home")
    marker = base / "served-outside"
    try:
        command = f"{sys.executable} -c '{SERVED}' {server.path} {marker} {base}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        # The first wall: the seccomp filter refuses the socket itself.
        walled = SandboxExecutor("read-only", home=base / "dsh-home", ambient=env)
        first = walled.run_sync(BashExecRequest(command, cwd=str(base), workspace=str(base), timeout=60))
        assert first.exit_code != 0 and "PermissionError" in first.stderr, first.stderr
        # The second: a deployment that lets the socket through still gets no command run.
        allowed = SandboxExecutor(
            "read-only", home=base / "dsh-home", ambient=env, allow_unix_sockets=(str(server.path),)
        )
        second = allowed.run_sync(BashExecRequest(command, cwd=str(base), workspace=str(base), timeout=60))
        assert "this dsh server refuses a client (pid " in second.stdout, (second.stdout, second.stderr)
        assert "from another PID namespace: a sandboxed command is never served" in second.stdout
        assert not marker.exists()
        # A client on the host is served as before.
        host = subprocess.run([sys.executable, "-c", SERVED, str(server.path), str(marker), str(base)], env=env,
                              capture_output=True, text=True, cwd=Path.cwd(), timeout=60)  # fmt: skip
        assert "'exit_code': 0" in host.stdout, host.stdout + host.stderr
    finally:
        _, log = server.stop()
    assert "refused a client (pid" in log
    assert marker.exists()  # the host's request ran it


@pytest.mark.parametrize("linked_into_tmp", [True, False])
def test_a_home_reached_through_a_link_is_passed_only_where_the_child_reads_it(
    base: Path, linked_into_tmp: bool
) -> None:
    """A home in /tmp reached from outside, or one outside reached through /tmp: neither path names it inside."""
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        if linked_into_tmp:
            real, link = Path(scratch) / "home", base / "home-link"
        else:
            real, link = base / "real-home", Path(scratch) / "home-link"
        real.mkdir(mode=0o700)
        link.symlink_to(real)
        deployment = base / "ro.yaml"
        deployment.write_text("plugins:\n  - {id: bash-local, name: bash-sandbox, config: {mode: read-only}}\n")
        deployment.chmod(0o600)
        done = dsh(
            "exec", "--json", "--deployment", str(deployment), "--",
            'echo "home=${DSH_HOME-unset} jsonl=${DSH_SESSION_JSONL-unset}"',
            home=link, cwd=base / "proj",
        )  # fmt: skip
        out = json.loads(done.stdout)
        assert out["exit_code"] == 0, out
        assert out["stdout"] == "home=unset jsonl=unset\n"


def test_a_models_workdir_through_dsh_run_makes_nothing_new_writable(base: Path) -> None:
    from dsh.testing import Endpoint

    home = base / "home"

    def reply(message: dict[str, object], finish: str) -> dict[str, object]:
        choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        return {"json": {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]}}

    call = {"command": f"touch x; echo evil >> {home}/.bashrc", "workdir": str(home)}
    tool_call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps(call)}}
    with Endpoint() as endpoint:
        endpoint.queue(
            reply({"role": "assistant", "content": None, "tool_calls": [tool_call]}, "tool_calls"),
            reply({"role": "assistant", "content": "done"}, "stop"),
        )
        env = {"OPENAI_BASE_URL": f"{endpoint.url}/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m", "HOME": str(home)}
        done = dsh(
            "run", "--model", "openai", "--deployment", str(base / "deployment.yaml"), "--prompt", "go",
            home=base / "dsh-home", env=env, cwd=base / "proj",
        )  # fmt: skip
        told = json.dumps(endpoint.bodies()[-1]["messages"][-1])
    assert done.returncode == 0, done.stderr
    assert told.count("Read-only file system") == 2, told
    assert not (home / "x").exists() and (home / ".bashrc").read_text() == "# the user's\n"


def test_dsh_serve_refuses_a_client_in_another_mount_namespace_alone(base: Path) -> None:
    """Same PID namespace, its own mount namespace (``unshare --mount``): refused, nothing run."""
    server = ServeProcess(base / "dsh-home")
    marker = base / "served-outside"
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", SERVED,
             str(server.path), str(marker), str(base)],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert "from another mount namespace: a sandboxed command is never served" in done.stdout, done
    finally:
        server.stop()
    assert not marker.exists()


def test_a_served_call_in_the_clients_home_is_refused(base: Path) -> None:
    """``dsh serve`` with the sandbox: the client's cwd is its session's workspace, its HOME the one that counts."""
    from tests.integration.serve_support import ask, request

    home = base / "home"
    deployment = str(base / "deployment.yaml")
    server = ServeProcess(base / "dsh-home", "--deployment", deployment)
    try:
        env = {"PATH": os.environ["PATH"], "HOME": str(home)}
        answer = ask(
            server.path, request(f"touch {home}/x; echo evil >> {home}/.bashrc", home, env, deployment=deployment)
        )
        assert answer is not None and f"will not make {home} writable: it holds your home {home}" in json.dumps(answer)
        made = ask(server.path, request("touch made", base / "proj", env, deployment=deployment))
        assert made is not None and made["ok"] and made["result"]["exit_code"] == 0, made
        outside = ask(server.path, request(f"touch {home}/y", base / "proj", env, deployment=deployment))
        assert outside is not None and outside["result"]["exit_code"] != 0
    finally:
        server.stop()
    assert not (home / "x").exists() and not (home / "y").exists() and (base / "proj" / "made").exists()
    assert (home / ".bashrc").read_text() == "# the user's\n"
