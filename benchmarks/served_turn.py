"""The server's side of a served ``dsh exec -- true``: from the request sent to the answer read.

    python benchmarks/served_turn.py [--rounds N] [--deployment builtin|sqlite|nofsync]
                                     [--tree DIR ...] [--profile FILE | --callgrind FILE | --strace FILE]

Starts one ``dsh serve`` per tree (``python -m dsh.cli serve`` of this interpreter, the tree's
``packages/*/src`` put first on ``PYTHONPATH``; without ``--tree`` this checkout as installed in the
environment), each in a home of its own, and sends them ``dsh exec -- true`` requests in turns, as
the ``dsh`` client does (the same frames, from a process that stays up, so no interpreter start is
timed). Prints per tree the medians and 10th/90th percentiles of: the request sent to the first
keep-alive (the request read, parsed and taken), the request sent to the answer (the whole turn),
and connect to close; and the CPU time the server itself used per turn (its threads, not the
commands it ran: ``/proc/PID/stat``, user and system), which moves far less with the machine's
load than the wall. Comparing two trees (``--tree /tmp/before --tree .``) in one run is the
before/after of a change on a shared, noisy machine.

``--profile FILE`` runs the (first) server under ``cProfile`` and writes its stats to FILE when it
stops; ``--callgrind FILE`` under callgrind (its instructions: two runs of different ``--rounds``,
subtracted, give a turn's, which the machine's load does not move); ``--strace FILE`` under
``strace -f -tt -T`` (a system call timeline per turn).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from curves import child_env

from dsh.cli_fast._wire import PROTOCOL, encode, recv_frame

DEPLOYMENTS = {
    "builtin": None,
    "sqlite": "persistence: {backend: sqlite}\n",
    "nofsync": "persistence: {backend: jsonl, config: {fsync: false}}\n",
}


class Served:
    """One ``dsh serve`` of one tree, in a home of its own."""

    def __init__(
        self, tree: str | None, home: Path, deployment: str | None, python: list[str], serve: list[str]
    ) -> None:
        self.label = tree or "installed"
        home.mkdir(mode=0o700)
        extra = {"DSH_HOME": str(home)}
        if deployment is not None:
            path = home / "deployment.yaml"
            path.write_text(deployment)
            path.chmod(0o600)
        if tree is not None:
            src = sorted(str(p) for p in (Path(tree) / "packages").glob("*/src"))
            extra["PYTHONPATH"] = os.pathsep.join(src)
        self.env = child_env(os.environ, **extra)
        self.log = home / "serve.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([*python, *serve], env=self.env, stderr=log)
        deadline = time.monotonic() + 600  # a server under valgrind takes minutes
        while True:
            text = self.log.read_text(errors="replace")
            if "listening on " in text:
                self.path = text.split("listening on ", 1)[1].splitlines()[0].strip()
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"dsh serve of {self.label} did not start: {text[-2000:]}")
            time.sleep(0.05)
        self.request = encode(
            {"protocol": PROTOCOL, "argv": ["exec", "--", "true"], "cwd": str(home), "env": dict(self.env)}
        )
        self.times: dict[str, list[float]] = {"keepalive": [], "answer": [], "connection": []}
        self.pid = _child_of(self.proc.pid) if python[0] == "strace" else self.proc.pid  # valgrind runs it in place
        self.cpu_ms = (0.0, 0.0)

    def turn(self) -> None:
        start = time.perf_counter()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
            sent = time.perf_counter()
            sock.sendall(self.request)
            first = recv_frame(sock)
            taken = time.perf_counter()
            answer = recv_frame(sock)
            answered = time.perf_counter()
        finally:
            sock.close()
        closed = time.perf_counter()
        if first is None or "keepalive" not in first or answer is None or answer.get("ok") is not True:
            raise RuntimeError(f"{self.label}: unexpected answer {first!r} / {answer!r}")
        if answer["result"]["exit_code"] != 0:
            raise RuntimeError(f"{self.label}: `true` exited {answer['result']['exit_code']}")
        self.times["keepalive"].append(taken - sent)
        self.times["answer"].append(answered - sent)
        self.times["connection"].append(closed - start)

    def cpu(self) -> tuple[float, float]:
        """Seconds of CPU the server itself (every thread, not its children) has used so far: user, system."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGTERM)  # the server, not a wrapper around it
        self.proc.wait(timeout=600)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, values in self.times.items():
            ordered = sorted(values)
            out[name] = {
                "median_ms": round(statistics.median(ordered) * 1e3, 3),
                "p10_ms": round(ordered[len(ordered) // 10] * 1e3, 3),
                "p90_ms": round(ordered[len(ordered) * 9 // 10] * 1e3, 3),
            }
        out["server_cpu_ms_per_turn"] = {"user": round(self.cpu_ms[0], 3), "system": round(self.cpu_ms[1], 3)}
        return out


def _child_of(pid: int) -> int:
    """The one child of a wrapper (strace) process: the server it runs."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            found = children.read().split()
        if found:
            return int(found[0])
        time.sleep(0.01)
    raise RuntimeError(f"process {pid} started no server")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--deployment", choices=sorted(DEPLOYMENTS), default="builtin")
    parser.add_argument("--tree", action="append", default=[], help="a checkout whose sources the server runs")
    parser.add_argument("--profile", help="run the first server under cProfile, its stats written here")
    parser.add_argument("--script", help="run this script (which starts `dsh serve`) in place of `-m dsh.cli serve`")
    parser.add_argument(
        "--callgrind",
        help="run the first server under valgrind's callgrind (its children not followed), its counts written here: "
        "the instructions of two runs of different --rounds, subtracted, are a turn's",
    )
    parser.add_argument("--strace", help="run the first server under strace -f -tt -T, its output written here")
    args = parser.parse_args()
    trees: list[str | None] = [os.path.abspath(t) for t in args.tree] or [None]
    with tempfile.TemporaryDirectory(prefix="served-turn-") as tmp:
        servers = []
        try:
            for index, tree in enumerate(trees):
                python = [sys.executable]
                if index == 0 and args.profile:
                    python = [sys.executable, "-m", "cProfile", "-o", os.path.abspath(args.profile)]
                elif index == 0 and args.callgrind:
                    python = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={os.path.abspath(args.callgrind)}"]
                    python.append(sys.executable)
                elif index == 0 and args.strace:
                    python = [
                        "strace",
                        "-f",
                        "-tt",
                        "-T",
                        "-e",
                        "trace=fsync,openat,unlink,rename,flock,vfork,execve,wait4,close_range",
                        "-o",
                        os.path.abspath(args.strace),
                        sys.executable,
                    ]
                serve = [args.script] if args.script else ["-m", "dsh.cli", "serve"]
                served = Served(tree, Path(tmp) / f"home{index}", DEPLOYMENTS[args.deployment], python, serve)
                servers.append(served)
            for _ in range(args.warmup):
                for served in servers:
                    served.turn()
            for served in servers:
                served.times = {k: [] for k in served.times}
                served.cpu_ms = served.cpu()
            for _ in range(args.rounds):
                for served in servers:
                    served.turn()
            for served in servers:
                (user, system), (user0, system0) = served.cpu(), served.cpu_ms
                served.cpu_ms = ((user - user0) * 1e3 / args.rounds, (system - system0) * 1e3 / args.rounds)
        finally:
            for served in servers:
                served.stop()
    load = os.getloadavg()[0]
    json.dump(
        {
            "rounds": args.rounds,
            "deployment": args.deployment,
            "load_average": round(load, 2),
            **{served.label: served.summary() for served in servers},
        },
        sys.stdout,
        indent=1,
    )
    print()


if __name__ == "__main__":
    main()
