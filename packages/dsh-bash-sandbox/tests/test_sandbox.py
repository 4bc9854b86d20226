"""The sandboxed executor against real bubblewrap: confinement, failing closed, and the local executor's contract."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, World
from dsh.bash_sandbox import SandboxError, SandboxExecutor

# Without bwrap these skip naming the package (fail under CI=true): dsh.testing's system_parts.
pytestmark = pytest.mark.system_parts("bubblewrap")


def _executor(tmp_path: Path, mode: str = "read-only", **kwargs: object) -> SandboxExecutor:
    """A sandbox whose DSH_HOME is ``tmp_path/home`` (never the real one)."""
    kwargs.setdefault("home", tmp_path / "home")
    return SandboxExecutor(mode, spill_dir=tmp_path / "spill", **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def work() -> Iterator[Path]:
    """A working directory outside /tmp (the sandbox's /tmp is private), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="dsh-sandbox-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_the_childs_dsh_variables_are_exactly_the_snapshot(tmp_path: Path) -> None:
    ambient = {"PATH": os.environ["PATH"], "DSH_SESSION_ID": "stale", "dsh_turn_id": "stale", "API_TOKEN": "x"}
    executor = _executor(tmp_path, ambient=ambient)
    snapshot = {"DSH_SESSION_ID": "fresh", "DSH_SHELL": "1"}
    result = executor.run_sync(BashExecRequest("env", cwd=str(tmp_path), workspace=str(tmp_path), dsh_env=snapshot))
    assert result.exit_code == 0, result
    child = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert {k: v for k, v in child.items() if k.upper().startswith("DSH_")} == snapshot
    assert "API_TOKEN" not in child and child["TERM"] == "dumb"


def test_read_only_writes_nothing_but_dev_null_and_a_private_tmp(tmp_path: Path, work: Path) -> None:
    (tmp_path / "harness-file").write_text("secret")
    executor = _executor(tmp_path)
    written = Path(f"/tmp/dsh-sandbox-probe-{os.getpid()}-{tmp_path.name}")  # no other test's or user's /tmp file
    script = f"""
        echo a >/dev/null && echo devnull-ok
        echo a >{written} && echo tmp-ok
        test -e {tmp_path}/harness-file || echo harness-tmp-hidden
        cat {work}/seen
        echo a >{work}/new
    """
    (work / "seen").write_text("visible\n")
    result = executor.run_sync(BashExecRequest(textwrap.dedent(script), cwd=str(work), workspace=str(work)))
    assert result.stdout == "devnull-ok\ntmp-ok\nharness-tmp-hidden\nvisible\n"
    assert result.exit_code == 1 and not (work / "new").exists()
    assert result.sandbox == {"mode": "read-only", "confined": True, "network": False, "denied": True}
    assert result.stderr.endswith(
        "dsh: the read-only sandbox denied a write (only a private /tmp and /dev/null are writable); "
        "the deployment's bash-sandbox mode decides what may be written\n"
    )
    assert result.as_data()["sandbox"]["denied"] is True
    assert not written.exists(), "the sandbox's /tmp is its own"


def test_a_working_directory_under_tmp_is_visible_read_only(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("here\n")
    result = _executor(tmp_path).run_sync(
        BashExecRequest("cat f; pwd; touch g", cwd=str(tmp_path), workspace=str(tmp_path))
    )
    assert result.stdout == f"here\n{tmp_path}\n" and result.sandbox is not None and result.sandbox["denied"]


def test_workspace_write_writes_the_workspace_only(tmp_path: Path, work: Path) -> None:
    executor = _executor(tmp_path, "workspace-write")
    ok = executor.run_sync(BashExecRequest("echo made >new && cat new", cwd=str(work), workspace=str(work)))
    assert ok.exit_code == 0 and ok.stdout == "made\n" and (work / "new").read_text() == "made\n"
    assert ok.sandbox == {"mode": "workspace-write", "confined": True, "network": False, "denied": False}
    denied = executor.run_sync(
        BashExecRequest(f"touch {work.parent}/dsh-sandbox-escape", cwd=str(work), workspace=str(work))
    )
    assert denied.exit_code == 1 and not (work.parent / "dsh-sandbox-escape").exists()
    assert f"only the workspace and writable roots ({work}), a private /tmp and /dev/null are writable" in denied.stderr


def test_full_mode_is_unconfined_and_says_so(tmp_path: Path, work: Path) -> None:
    result = _executor(tmp_path, "full").run_sync(
        BashExecRequest(f"touch {work}/full", cwd=str(work), workspace=str(work))
    )
    assert result.exit_code == 0 and (work / "full").exists()
    assert result.sandbox == {"mode": "full", "confined": False, "network": True, "denied": False}


def test_root_in_the_sandbox_cannot_remount_it_writable(tmp_path: Path, work: Path) -> None:
    result = _executor(tmp_path).run_sync(
        BashExecRequest(
            f"mount -o remount,rw / ; mount -o remount,rw {work}; touch {work}/x", cwd=str(work), workspace=str(work)
        )
    )
    assert result.exit_code != 0 and not (work / "x").exists()


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP server on the harness's network that answers "pong"."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        try:
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.sendall(b"pong\n")
        except OSError:
            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def test_network_is_off_unless_configured(tmp_path: Path, listener: int) -> None:
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{listener} && head -1 <&3"
    off = _executor(tmp_path).run_sync(BashExecRequest(probe, cwd=str(tmp_path), workspace=str(tmp_path), timeout=10))
    assert off.exit_code != 0 and "pong" not in off.stdout
    on = _executor(tmp_path, network=True).run_sync(
        BashExecRequest(probe, cwd=str(tmp_path), workspace=str(tmp_path), timeout=10)
    )
    assert on.exit_code == 0 and on.stdout == "pong\n" and on.sandbox is not None and on.sandbox["network"]


def test_missing_bubblewrap_fails_closed_before_anything_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    executor = _executor(tmp_path, bwrap=str(tmp_path / "no-such-bwrap"))
    with pytest.raises(SandboxError) as caught:
        executor.run_sync(BashExecRequest(f"touch {marker}", cwd=str(tmp_path), workspace=str(tmp_path)))
    assert str(caught.value) == (
        f"the read-only sandbox cannot run: bubblewrap ('{tmp_path}/no-such-bwrap') is not installed at "
        f"{tmp_path}/no-such-bwrap; install it (Debian: apt-get install bubblewrap) or set the bash-sandbox "
        "config's bwrap to its absolute path"
    )
    assert not marker.exists()
    with pytest.raises(SandboxError):
        asyncio.run(executor.run(BashExecRequest(f"touch {marker}", cwd=str(tmp_path), workspace=str(tmp_path))))
    assert not marker.exists()


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="needs root: in a user namespace an ordinary user makes, / belongs to the overflow uid, "
    "so dsh rightly refuses /usr/bin/bwrap below it before bubblewrap is tried",
)
def test_no_namespaces_fails_closed_with_the_fix(tmp_path: Path) -> None:
    """A user namespace whose namespace limits are 0: bubblewrap itself cannot create its sandbox there."""
    marker = tmp_path / "ran"
    script = textwrap.dedent(
        f"""
        import glob
        for limit in glob.glob("/proc/sys/user/max_*_namespaces"):
            open(limit, "w").write("0")
        from dsh.bash import BashExecRequest
        from dsh.bash_sandbox import SandboxError, SandboxExecutor
        try:
            SandboxExecutor(spill_dir={str(tmp_path / "spill")!r}).run_sync(BashExecRequest("touch {marker}"))
        except SandboxError as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd="/",  # the command's folder: not this clone's, which may be under the sandbox's private /tmp
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("the read-only sandbox cannot run: bubblewrap cannot create its namespaces here (")
    assert "allow user namespaces (sysctl user.max_user_namespaces > 0" in done.stdout
    assert not marker.exists()


def _alive(tag: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if tag.encode() in cmdline and b"sleep" in cmdline:
                found.append(entry)
    return found


def test_a_timeout_kills_the_whole_sandbox_and_keeps_the_output(tmp_path: Path) -> None:
    tag = f"{os.getpid() % 1000 + 7000}.5"
    started = time.monotonic()
    result = _executor(tmp_path).run_sync(
        BashExecRequest(
            f"echo before; sleep {tag} & sleep {tag}", cwd=str(tmp_path), workspace=str(tmp_path), timeout=0.5
        )
    )
    assert result.exit_code == 124 and result.timed_out and result.stdout == "before\n"
    assert time.monotonic() - started < 5
    assert _alive(tag) == []


def test_a_cancelled_run_kills_the_sandbox(tmp_path: Path) -> None:
    tag = f"{os.getpid() % 1000 + 8000}.5"

    async def main() -> None:
        task = asyncio.ensure_future(
            _executor(tmp_path).run(BashExecRequest(f"sleep {tag}", cwd=str(tmp_path), workspace=str(tmp_path)))
        )
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _alive(tag) == []


def test_statuses_are_the_shells(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    assert executor.run_sync(BashExecRequest("exit 7", cwd=str(tmp_path), workspace=str(tmp_path))).exit_code == 7
    assert (
        executor.run_sync(BashExecRequest("kill -TERM $$", cwd=str(tmp_path), workspace=str(tmp_path))).exit_code == 143
    )


def test_output_past_the_limit_is_spilled_outside_the_sandbox(tmp_path: Path) -> None:
    executor = _executor(tmp_path, max_output=100)
    result = executor.run_sync(BashExecRequest("seq 1 20000", cwd=str(tmp_path), workspace=str(tmp_path)))
    assert result.stdout_spill is not None and result.stdout.endswith("19999\n20000\n")
    assert Path(result.stdout_spill).read_text() == "".join(f"{n}\n" for n in range(1, 20001))


def test_the_world_says_what_the_child_reads(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "f").write_text("x")
    world = _executor(tmp_path, hide=(str(hidden),)).world
    assert isinstance(world, World) and world.kind == "sandbox"
    assert world.why_not("/etc/passwd") is None
    assert world.why_not("/tmp/x") == "/tmp/x is hidden in the read-only sandbox"
    assert world.access("/tmp/x", cwd="/tmp") == "read"
    assert _executor(tmp_path, "workspace-write").world.access("/var/w/x", cwd="/var/w") == "write"
    assert _executor(tmp_path, "full").world.kind == "local"
    result = _executor(tmp_path, hide=("/var",)).run_sync(BashExecRequest("ls -A /var | wc -l", cwd="/"))
    assert result.stdout == "0\n"
