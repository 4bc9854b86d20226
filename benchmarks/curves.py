"""Start-up figures per subcommand and cost curves (issue 14), each beside its floor.

Process figures run children with bytecode caching allowed (``PYTHONDONTWRITEBYTECODE`` removed)
after one warm-up, as an installed ``dsh`` runs; wall time and peak memory are each child's own,
measured by a small launcher process (see :data:`LAUNCHER`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import io
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gen_dists import generate

from dsh.cli._show import render
from dsh.persistence.jsonl import JsonlPersistence
from dsh.persistence.sqlite import SqlitePersistence
from dsh.session import SessionEvent, SessionHeader, SessionStore

DSH = [sys.executable, "-m", "dsh.cli"]
DEPENDENCY_FLOOR = (
    "import asyncio, argparse, json, orjson, importlib.metadata, pydantic\n"
    "class M(pydantic.BaseModel):\n    x: int\nM(x=1)"
)
"""What importing only dsh's dependencies (and building one model) costs: the floor under dsh's own work."""


def child_env(base: Mapping[str, str], **extra: str) -> dict[str, str]:
    """``base`` for a measured child, plus ``extra``: bytecode caching allowed, and none of the caller's
    ``DSH_*`` (a deployment or session of the shell running the benchmark) or ``PYTHONPATH`` (which
    would put other sources in front of the environment measured)."""
    dropped = ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
    env = {k: v for k, v in base.items() if k not in dropped and not k.upper().startswith("DSH_")}
    env.update(extra)
    return env


LAUNCHER = (
    "import os, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(proc.pid, 0)\n"
    "print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status))"
)
"""Runs one child and reports its wall time and peak RSS. A child's ``ru_maxrss`` includes the image it
was forked from (the memory map before ``exec``), so children are forked from this small launcher,
never from the benchmark process, whose own size grows as it builds sessions."""


def run_child(argv: list[str], env: Mapping[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process."""
    out = subprocess.run([sys.executable, "-c", LAUNCHER, *argv], env=dict(env), capture_output=True, text=True)
    wall, peak, code = out.stdout.split()
    if out.returncode != 0 or int(code) != 0:
        raise RuntimeError(f"{argv} exited {code}: {out.stderr}")
    return float(wall), int(peak)


def interleave(jobs: Mapping[str, tuple[list[str], Mapping[str, str]]], rounds: int) -> dict[str, dict[str, float]]:
    """Median wall (ms) and peak RSS (MiB) of each job, run in a new shuffled order each round."""
    walls: dict[str, list[float]] = {k: [] for k in jobs}
    rss: dict[str, list[int]] = {k: [] for k in jobs}
    for argv, env in jobs.values():
        run_child(argv, env)  # warm-up: bytecode written, page cache filled
    shuffle = random.Random(14)
    for _ in range(rounds):
        for key in shuffle.sample(list(jobs), len(jobs)):
            wall, peak = run_child(*jobs[key])
            walls[key].append(wall)
            rss[key].append(peak)
    return {k: {"ms": statistics.median(walls[k]) * 1000, "peak_mib": statistics.median(rss[k]) / 1024} for k in jobs}


def _events(n: int, turns: int = 1) -> list[SessionEvent]:
    out = []
    per_turn = max(1, n // turns)
    for i in range(n):
        if i % per_turn == 0:
            out.append(SessionEvent(type="turn/start", data={"turn_id": f"s:turn-{i // per_turn + 1}"}))
        else:
            out.append(SessionEvent(type="tool/result", data={"call_id": f"c{i}", "output": "x" * 120}))
    return out


def _seed_session(home: Path, session_id: str, events: int, backend: str = "jsonl") -> None:
    store: Any = (
        JsonlPersistence(home / "sessions", fsync=False)
        if backend == "jsonl"
        else SqlitePersistence(home / "sessions.sqlite3", synchronous="OFF")
    )
    header = SessionHeader(id=session_id, cwd=str(home))
    batch = _events(events, turns=max(1, events // 100))
    for start in range(0, len(batch), 5000):
        store.write(header, batch[start : start + 5000])
    store.close()


def bench_cold(tmp: Path, size: dict[str, Any]) -> dict[str, Any]:
    """Cold figures per subcommand, beside ``python -c pass`` and the dependency floor."""
    home = tmp / "cold-home"
    home.mkdir(mode=0o700)
    _seed_session(home, "cold-session", 4)
    env = child_env(os.environ, DSH_HOME=str(home))
    # The README's one-line SQLite deployment file: with the validated-form cache it should cost
    # what the built-in deployment costs (issue 22: within 10%).
    sqlite_file = home / "sqlite.yaml"
    sqlite_file.write_text("persistence: {backend: sqlite}\n")
    sqlite_file.chmod(0o600)
    with_file = child_env(os.environ, DSH_HOME=str(home), DSH_DEPLOYMENT=str(sqlite_file))
    # The same file naming the built-in backend: what having a deployment file costs, apart from
    # what the SQLite backend it picks costs.
    jsonl_file = home / "jsonl.yaml"
    jsonl_file.write_text("persistence: {backend: jsonl}\n")
    jsonl_file.chmod(0o600)
    with_jsonl_file = child_env(os.environ, DSH_HOME=str(home), DSH_DEPLOYMENT=str(jsonl_file))
    jobs: dict[str, tuple[list[str], Mapping[str, str]]] = {
        "python_pass": ([sys.executable, "-c", "pass"], env),
        "dependency_floor": ([sys.executable, "-c", DEPENDENCY_FLOOR], env),
        "exec": ([*DSH, "exec", "--no-server", "--", "true"], env),
        "exec_deployment_file": ([*DSH, "exec", "--no-server", "--", "true"], with_file),
        "exec_jsonl_deployment_file": ([*DSH, "exec", "--no-server", "--", "true"], with_jsonl_file),
        "sessions_list_deployment_file": ([*DSH, "sessions", "list"], with_file),
        "env": ([*DSH, "env"], env),
        "plugins": ([*DSH, "plugins"], env),
        "sessions_list": ([*DSH, "sessions", "list"], env),
        "sessions_locate": ([*DSH, "sessions", "locate", "cold-session"], env),
    }
    # More rounds than the other process figures: these sit near their 6x line, and the floor's own
    # median (a 20 ms process) moves by a tenth between runs of 15.
    med = interleave(jobs, size["cold_rounds"])
    floor = med["python_pass"]["ms"]
    out = {
        f"cold_{k}": {
            "median_ms": v["ms"],
            "floor_median_ms": floor,
            "dependency_floor_ms": med["dependency_floor"]["ms"],
            "ratio": v["ms"] / floor,
            "peak_mib": v["peak_mib"],
        }
        for k, v in med.items()
        if k not in ("python_pass", "dependency_floor")
    }
    out["cold_floors"] = {"python_pass_ms": floor, "dependency_floor_ms": med["dependency_floor"]["ms"]}
    out["cold_deployment_file_cost"] = {
        "exec_with_file_over_builtin": med["exec_deployment_file"]["ms"] / med["exec"]["ms"],
        "exec_with_jsonl_file_over_builtin": med["exec_jsonl_deployment_file"]["ms"] / med["exec"]["ms"],
        "sessions_list_with_file_over_builtin": (
            med["sessions_list_deployment_file"]["ms"] / med["sessions_list"]["ms"]
        ),
    }
    return out


def bench_resume(tmp: Path, size: dict[str, Any]) -> dict[str, Any]:
    """``dsh exec --session ID -- true`` on sessions of 4 / 10,000 / 40,000 events: time and peak memory.

    JSONL and SQLite, each seeded with flushes of up to 5,000 events (a turn every 100).
    """
    home = tmp / "resume-home"
    home.mkdir(mode=0o700)
    deployment = home / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    env = child_env(os.environ, DSH_HOME=str(home))
    jobs: dict[str, tuple[list[str], Mapping[str, str]]] = {}
    for backend, extra in (("jsonl", []), ("sqlite", ["--deployment", str(deployment)])):
        for n in size["resume_events"]:
            sid = f"resume-{backend}-{n}"
            _seed_session(home, sid, n, backend)
            jobs[f"{backend}/{n}"] = ([*DSH, "exec", "--no-server", *extra, "--session", sid, "--", "true"], env)
    med = interleave(jobs, size["process_rounds"])
    small, big = size["resume_events"][0], size["resume_events"][-1]
    out = {}
    for backend, key in (("jsonl", "resume_by_events"), ("sqlite", "resume_by_events_sqlite")):
        mine = {str(n): med[f"{backend}/{n}"] for n in size["resume_events"]}
        out[key] = {
            "events": size["resume_events"],
            "median_ms": {k: v["ms"] for k, v in mine.items()},
            "peak_mib": {k: v["peak_mib"] for k, v in mine.items()},
            "ratio": mine[str(big)]["ms"] / mine[str(small)]["ms"],
            "memory_ratio": mine[str(big)]["peak_mib"] / mine[str(small)]["peak_mib"],
        }
    return out


def _per_call_ms(fn: Callable[[], object], repeats: int) -> float:
    # What earlier benchmarks left in this long-lived process must not be walked by the collector
    # while this one is timed (a one-shot `dsh` runs with the collector off altogether): freeze it.
    gc.collect()
    gc.freeze()
    try:
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    finally:
        gc.unfreeze()
    return statistics.median(samples) * 1000


def bench_show(tmp: Path, size: dict[str, Any]) -> dict[str, Any]:
    """``sessions show`` per event (resume with history, render) against a stdlib read-and-print floor."""
    home = tmp / "show-home"
    home.mkdir(mode=0o700)
    backend = JsonlPersistence(home / "sessions", fsync=False)
    store = SessionStore(lambda: backend)
    ours: dict[str, float] = {}
    floor: dict[str, float] = {}
    for n in size["show_events"]:
        sid = f"show-{n}"
        _seed_session(home, sid, n)
        path = backend.locate(SessionHeader(id=sid, cwd=str(home))).path

        def show(sid: str = sid, path: str = path) -> None:
            session = store.resume(sid)
            sink = io.StringIO()
            sink.writelines(line + "\n" for line in render(session.header, path, session.history))

        def stdlib(path: str = path) -> None:
            sink = io.StringIO()
            with open(path, "rb") as fh:
                for raw in fh:
                    obj = json.loads(raw)
                    sink.write(f"{obj.get('type')} {json.dumps(obj.get('data'))}\n")

        ours[str(n)] = _per_call_ms(show, size["show_repeats"])
        floor[str(n)] = _per_call_ms(stdlib, size["show_repeats"])
    small, big = size["show_events"][0], size["show_events"][-1]
    per_event = (ours[str(big)] - ours[str(small)]) / (big - small) * 1000
    floor_per_event = (floor[str(big)] - floor[str(small)]) / (big - small) * 1000
    backend.close()
    return {
        "show_per_event": {
            "events": size["show_events"],
            "median_ms": ours,
            "floor_median_ms": floor,
            "per_event_us": per_event,
            "floor_per_event_us": floor_per_event,
            "ratio": per_event / floor_per_event if floor_per_event > 0 else None,
        }
    }


def _jsonl_list_floor(root: Path) -> Callable[[], object]:
    def floor() -> list[Any]:
        out = []
        for directory in sorted(os.scandir(root), key=lambda e: e.name):
            for entry in sorted(os.scandir(directory.path), key=lambda e: e.name):
                if entry.name.endswith(".jsonl"):
                    with open(entry.path, "rb") as fh:
                        out.append(json.loads(fh.readline())["header"])
        return sorted(out, key=lambda h: (h["created_at"], h["id"]))

    return floor


def _sqlite_list_floor(path: Path) -> Callable[[], object]:
    def floor() -> list[Any]:
        with contextlib.closing(sqlite3.connect(path)) as db:
            rows = db.execute("SELECT header FROM sessions ORDER BY created_at, id").fetchall()
        return [json.loads(r[0]) for r in rows]

    return floor


def _same(value: Any) -> Any:
    return value


def _locate(store: SessionStore, session_id: str) -> object:
    return store.locate(store.resume(session_id, history=False).header)


def bench_sessions(tmp: Path, size: dict[str, Any]) -> dict[str, Any]:
    """list / locate / resume at 10 / 1,000 / 10,000 stored sessions, JSONL and SQLite; list against its floor."""
    out: dict[str, Any] = {}
    counts = size["session_counts"]
    for name in ("jsonl", "sqlite"):
        root = tmp / f"many-{name}"
        backend: Any = (
            JsonlPersistence(root, fsync=False)
            if name == "jsonl"
            else SqlitePersistence(tmp / "many.sqlite3", synchronous="OFF")
        )
        floor_fn = _jsonl_list_floor(root) if name == "jsonl" else _sqlite_list_floor(tmp / "many.sqlite3")
        store = SessionStore(functools.partial(_same, backend))
        made = 0
        curve: dict[str, dict[str, float]] = {}
        event = [SessionEvent(type="turn/start", data={"turn_id": "x:turn-1"})]
        for count in counts:
            while made < count:
                backend.write(SessionHeader(id=f"s-{made:06d}", cwd=f"/work/{made % 7}"), event)
                made += 1
            target = f"s-{count // 2:06d}"
            repeats = size["list_repeats"]
            curve[str(count)] = {
                "list_ms": _per_call_ms(backend.list, repeats),
                "floor_list_ms": _per_call_ms(floor_fn, repeats),
                "locate_ms": _per_call_ms(functools.partial(_locate, store, target), repeats * 5),
                "resume_ms": _per_call_ms(functools.partial(store.resume, target, history=False), repeats * 5),
            }
        small, big = str(counts[0]), str(counts[-1])
        span = counts[-1] - counts[0]
        growth = (curve[big]["list_ms"] - curve[small]["list_ms"]) / span * 1000
        floor_growth = (curve[big]["floor_list_ms"] - curve[small]["floor_list_ms"]) / span * 1000
        out[f"sessions_list_{name}"] = {
            "sessions": counts,
            "curve": curve,
            "per_session_us": growth,
            "floor_per_session_us": floor_growth,
            "ratio": growth / floor_growth if floor_growth > 0 else None,
        }
        backend.close()
    return out


CONTRIBUTOR_SRC = (
    "class C:\n    name = {name!r}\n    variables = {{{key!r}: 'bench'}}\n\n"
    "    def resolve(self, execution):\n        return {{}}\n"
)


def _contributors(site: Path, count: int) -> None:
    for n in range(count):
        mod = f"bench_contrib_{n:03d}"
        info = site / f"{mod}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: bench-contrib-{n:03d}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[dsh.bash_env]\nbench-{n:03d} = {mod}:C\n")
        (site / f"{mod}.py").write_text(CONTRIBUTOR_SRC.format(name=f"bench-{n:03d}", key=f"DSH_BENCH_{n:03d}"))


LOAD_FLOOR = (
    "import importlib.metadata as m\n"
    "for ep in m.entry_points(group='dsh.bash_env'):\n"
    "    ep.load(); ep.dist.metadata['Name']"
)
"""The loading floor: find every contributor, import it and name its distribution, with the stdlib alone."""


BOOT_TIMED = (
    "import time\n"
    "from dsh.harness import open_runtime\n"
    "from dsh.bash_env import BASH_ENV\n"
    "start = time.perf_counter()\n"
    "with open_runtime() as runtime:\n"
    "    keys = len(runtime.ctx.require(BASH_ENV).list())\n"
    "print((time.perf_counter() - start) * 1000, keys)"
)
"""Boot the default deployment (discovery, loading every plugin and contributor), timed inside the process."""

LOAD_FLOOR_TIMED = (
    "import time, importlib.metadata as m\n"
    "start = time.perf_counter()\n"
    "for ep in m.entry_points(group='dsh.bash_env'):\n"
    "    ep.load(); ep.dist.metadata['Name']\n"
    "print((time.perf_counter() - start) * 1000, 0)"
)

IMPORT_FLOOR_TIMED = (
    "import sys, time, importlib\n"
    "names = [f'bench_contrib_{n:03d}' for n in range(int(sys.argv[1]))]\n"
    "start = time.perf_counter()\n"
    "for name in names:\n"
    "    importlib.import_module(name).C\n"
    "print((time.perf_counter() - start) * 1000, 0)"
)
"""The import floor: only import each contributor's module by name (no finding, no metadata), timed inside."""


def _timed_child(argv: list[str], env: Mapping[str, str]) -> float:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=120)
    return float(done.stdout.split()[0])


def bench_discovery_inprocess(tmp: Path, size: dict[str, Any]) -> dict[str, Any]:
    """Discovery per contributor timed inside each process (1 vs 50 contributors), free of process start noise.

    Each child imports dsh first, then times only the boot of the default deployment: finding
    every plugin and ``dsh.bash_env`` contributor (through the discovery cache, as a repeated
    command does) and loading each in its fiber. The floor child times the stdlib finding,
    importing and naming the distribution of each contributor; the import floor child only
    imports each contributor's module by name, the part no loader can avoid (dsh's own work per
    contributor is the difference).
    """
    home = tmp / "disc-inproc-home"
    home.mkdir(mode=0o700)
    c0, c1 = size["contributors"]
    runs: dict[str, list[float]] = {}
    jobs = []
    for count in (c0, c1):
        site = tmp / f"site-inproc-{count}"
        site.mkdir()
        _contributors(site, count)
        env = child_env(os.environ, DSH_HOME=str(home), PYTHONPATH=str(site))
        jobs.append((f"dsh_{count}", [sys.executable, "-c", BOOT_TIMED], env))
        jobs.append((f"floor_{count}", [sys.executable, "-c", LOAD_FLOOR_TIMED], env))
        jobs.append((f"import_{count}", [sys.executable, "-c", IMPORT_FLOOR_TIMED, str(count)], env))
        _timed_child(jobs[-3][1], env)  # warm-up: bytecode, and the discovery cache for this sys.path
    order = random.Random(14)
    for _ in range(size["process_rounds"]):
        for key, argv, env in order.sample(jobs, len(jobs)):
            runs.setdefault(key, []).append(_timed_child(argv, env))
    med = {k: statistics.median(v) for k, v in runs.items()}
    per = (med[f"dsh_{c1}"] - med[f"dsh_{c0}"]) / (c1 - c0)
    floor = (med[f"floor_{c1}"] - med[f"floor_{c0}"]) / (c1 - c0)
    imports = (med[f"import_{c1}"] - med[f"import_{c0}"]) / (c1 - c0)
    return {
        "discovery_inprocess": {
            "median_boot_ms": med,
            "per_contributor_ms": per,
            "floor_per_contributor_ms": floor,
            "ratio": per / floor if floor > 0 else None,
            "import_floor_per_contributor_ms": imports,
            "own_per_contributor_ms": per - imports,
            "import_ratio": per / imports if imports > 0 else None,
        }
    }


def bench_discovery_curve(tmp: Path, size: dict[str, Any]) -> dict[str, Any]:
    """``dsh env`` with 10 / 500 installed distributions and 1 / 50 contributors, against the loading floor."""
    home = tmp / "disc-home"
    home.mkdir(mode=0o700)
    jobs: dict[str, tuple[list[str], Mapping[str, str]]] = {}
    for dists in (size["dists_small"], size["dists_big"]):
        for contributors in size["contributors"]:
            site = generate(tmp / f"site-{dists}-{contributors}", dists)
            _contributors(site, contributors)
            env = child_env(os.environ, DSH_HOME=str(home), PYTHONPATH=str(site))
            jobs[f"dsh_{dists}_{contributors}"] = ([*DSH, "env", "--json"], env)
            jobs[f"floor_{dists}_{contributors}"] = ([sys.executable, "-c", LOAD_FLOOR], env)
    med = {k: v["ms"] for k, v in interleave(jobs, size["process_rounds"]).items()}
    d0, d1 = size["dists_small"], size["dists_big"]
    c0, c1 = size["contributors"]
    per_contributor = (med[f"dsh_{d0}_{c1}"] - med[f"dsh_{d0}_{c0}"]) / (c1 - c0)
    floor_per_contributor = (med[f"floor_{d0}_{c1}"] - med[f"floor_{d0}_{c0}"]) / (c1 - c0)
    growth = med[f"dsh_{d1}_{c0}"] - med[f"dsh_{d0}_{c0}"]
    floor_growth = med[f"floor_{d1}_{c0}"] - med[f"floor_{d0}_{c0}"]
    return {
        "discovery_curve": {
            "median_ms": med,
            "per_contributor_ms": per_contributor,
            "floor_per_contributor_ms": floor_per_contributor,
            "dists_growth_ms": growth,
            "floor_dists_growth_ms": floor_growth,
            "dists_growth_ratio": growth / floor_growth if floor_growth > 0 else None,
        }
    }


def _proc_status(pid: int) -> dict[str, Any]:
    try:
        fds: int | str = len(os.listdir(f"/proc/{pid}/fd"))
    except PermissionError:
        # dsh serve makes itself non-dumpable (seal_process): only root may list its descriptors.
        fds = "unreadable: dsh serve is not dumpable, only root can count its /proc/PID/fd"
    rss_kib = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kib = int(line.split()[1])
    return {"open_files": fds, "rss_mib": rss_kib / 1024}


def bench_serve_growth(tmp: Path, size: dict[str, Any]) -> dict[str, Any]:
    """``dsh serve``'s open files and memory after 1 and after N served execs (clients run in this process)."""
    from dsh.cli_fast._client import main as client_main

    home = tmp / "serve-home"
    home.mkdir(mode=0o700)
    env = child_env(os.environ, DSH_HOME=str(home))
    server = subprocess.Popen([*DSH, "serve"], env=env, stderr=subprocess.PIPE, text=True)
    first = server.stderr.readline() if server.stderr is not None else ""
    if not first.startswith("dsh serve: listening on"):
        raise RuntimeError(f"dsh serve did not start: {first}")
    # Keep reading its log: a full pipe would block the server's next write, and so the exec.
    threading.Thread(target=server.communicate, daemon=True).start()
    saved = os.environ.get("DSH_HOME")
    os.environ["DSH_HOME"] = str(home)
    out: dict[str, Any] = {}
    try:
        done = 0
        for target in (1, size["serve_execs"]):
            while done < target:
                with contextlib.redirect_stdout(io.StringIO()):
                    code = client_main(["exec", "--", "true"])
                if code != 0:
                    raise RuntimeError(f"served dsh exec exited {code}")
                done += 1
            time.sleep(0.2)  # the server closes the last connection after its answer: count after that
            out[str(target)] = _proc_status(server.pid)
    finally:
        if saved is None:
            os.environ.pop("DSH_HOME", None)
        else:
            os.environ["DSH_HOME"] = saved
        server.terminate()
        server.wait(timeout=30)
    return {"serve_growth": {"execs": [1, size["serve_execs"]], "after": out}}


def bench_overlap_matched(home: Path, size: dict[str, Any], harness: Callable[[Path], Any]) -> dict[str, Any]:
    """Overlapping tool calls against a matched floor: the same argv and the same environment per call."""
    from dsh.bash_env import BASH_ENV
    from dsh.session import SESSIONS, TOOLS, AgentRef, ToolExecution

    runtime = harness(home)
    agents, calls = size["agents"], size["calls_per_agent"]
    try:
        store = runtime.ctx.require(SESSIONS)
        sessions = [store.create(home) for _ in range(agents)]
        bash = runtime.ctx.require(TOOLS).get("bash")
        registry = runtime.ctx.require(BASH_ENV)
        command = 'echo "$DSH_SESSION_ID"'

        def execution(n: int) -> ToolExecution:
            return ToolExecution("bash", f"c{n}", agent=AgentRef(f"a{n % agents}", sessions[n % agents].header))

        # The matched floor spawns the very argv, environment and cwd the executor would for each call.
        executor = bash.executor()
        specs = [
            executor.spec(bash.request({"command": command}, execution(n), registry.collect(execution(n))))
            for n in range(agents * calls)
        ]

        async def ours() -> int:
            async def one(n: int) -> bool:
                result = await bash({"command": command}, execution(n))
                return bool(result.data["stdout"].strip() == sessions[n % agents].id)

            results = await asyncio.gather(*(one(n) for n in range(agents * calls)))
            return sum(not ok for ok in results)

        async def raw() -> None:
            async def one(n: int) -> None:
                spec = specs[n]
                proc = await asyncio.create_subprocess_exec(
                    *spec.argv,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=dict(spec.env),
                    cwd=spec.cwd,
                    start_new_session=True,
                )
                await proc.communicate()

            await asyncio.gather(*(one(n) for n in range(agents * calls)))

        ours_t, raw_t, wrong = [], [], 0
        for _ in range(size["overlap_rounds"]):
            start = time.perf_counter()
            asyncio.run(raw())
            raw_t.append(time.perf_counter() - start)
            start = time.perf_counter()
            wrong += asyncio.run(ours())
            ours_t.append(time.perf_counter() - start)
        o, r = statistics.median(ours_t), statistics.median(raw_t)
        return {
            "overlapping_matched": {
                "median_ms": o * 1000,
                "floor_median_ms": r * 1000,
                "ratio": o / r,
                "calls_that_saw_another_session": wrong,
            }
        }
    finally:
        runtime.close()
