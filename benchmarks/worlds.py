"""What an execution world costs a shell call: a sandboxed ``true`` against a local one, and an SSH call
against a raw command over the same kind of connection.

    python benchmarks/worlds.py [--rounds N]     # or as part of `hatch run bench` (not under --quick)

Needs bubblewrap, and for the SSH figures root and OpenSSH's sshd (a throw-away one on a loopback port,
``dsh.bash_ssh.testing``). Each figure is a median over interleaved rounds, with its floor and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncssh

from dsh.bash import BashExecRequest, LocalExecutor
from dsh.bash_sandbox import Mode, SandboxExecutor
from dsh.bash_ssh import SshExecutor
from dsh.bash_ssh.testing import HostUnavailable, TemporaryHost


def _figure(ours: list[float], floor: list[float]) -> dict[str, float]:
    o, f = statistics.median(ours), statistics.median(floor)
    return {"median_ms": o * 1000, "floor_median_ms": f * 1000, "ratio": o / f}


def bench_sandbox(tmp: Path, rounds: int) -> dict[str, Any]:
    """``true`` through the sandbox against the local executor, both without an event loop.

    The sandbox runs as deployed: its seccomp filter on (built once per process, one pipe per call),
    and in ``workspace-write`` the protected paths of a git repository's workspace bound read-only.
    """
    workspace = tmp / "workspace"
    workspace.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    request = BashExecRequest("true", cwd=str(workspace), workspace=str(workspace))
    local = LocalExecutor(spill_dir=tmp / "spill")
    out: dict[str, Any] = {}
    modes: tuple[Mode, ...] = ("read-only", "workspace-write")
    for mode in modes:
        sandbox = SandboxExecutor(mode, spill_dir=tmp / "spill", home=tmp / "home")
        sandbox.run_sync(request)  # the one-time check that bubblewrap works is not a call's cost
        ours, floor = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            assert sandbox.run_sync(request).exit_code == 0
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            assert local.run_sync(request).exit_code == 0
            floor.append(time.perf_counter() - start)
        out[f"sandbox_true_{mode.replace('-', '_')}"] = {**_figure(ours, floor), "seccomp_filter": True}
    return out


def bench_ssh(tmp: Path, rounds: int) -> dict[str, Any]:
    """A bash-ssh ``true`` on a warm pooled connection against ``true`` run raw on a warm asyncssh connection.

    Also, for scale, a fresh OpenSSH client process per ``ssh host true`` (no connection reuse).
    """
    host = TemporaryHost()
    try:
        host.setup()
    except HostUnavailable as exc:
        return {"ssh_true": {"skipped": str(exc)}}
    try:
        executor = SshExecutor(
            host.host,
            port=host.port,
            user=host.user,
            identity_file=host.identity_file,
            known_hosts=host.known_hosts,
            spill_dir=tmp / "spill",
        )
        ssh_argv = [
            "ssh", "-q", "-i", str(host.identity_file), "-o", f"UserKnownHostsFile={host.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", str(host.port),
            f"{host.user}@{host.host}", "true",
        ]  # fmt: skip

        async def scenario() -> tuple[list[float], list[float], list[float]]:
            raw = await asyncssh.connect(
                host.host,
                host.port,
                username=host.user,
                client_keys=[str(host.identity_file)],
                known_hosts=str(host.known_hosts),
                agent_path=None,
                config=[],
            )
            try:
                await executor.run(BashExecRequest("true"))  # open the pool
                ours, floor, fresh = [], [], []
                for _ in range(rounds):
                    start = time.perf_counter()
                    assert (await executor.run(BashExecRequest("true"))).exit_code == 0
                    ours.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    assert (await raw.run("true", check=False)).exit_status == 0
                    floor.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    subprocess.run(ssh_argv, check=True)
                    fresh.append(time.perf_counter() - start)
                return ours, floor, fresh
            finally:
                raw.close()
                await executor.close()

        ours, floor, fresh = asyncio.run(scenario())
        figure = _figure(ours, floor)
        figure["openssh_fresh_process_median_ms"] = statistics.median(fresh) * 1000
        figure["ratio_to_openssh_fresh_process"] = statistics.median(ours) / statistics.median(fresh)
        return {"ssh_true": figure}
    finally:
        host.cleanup()


def bench_worlds(tmp: Path, rounds: int) -> dict[str, Any]:
    """Every world figure."""
    return {**bench_sandbox(tmp, rounds), **bench_ssh(tmp, rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-worlds-", dir="/var/tmp") as tmp:
        print(json.dumps(bench_worlds(Path(tmp), args.rounds), indent=2))


if __name__ == "__main__":
    main()
