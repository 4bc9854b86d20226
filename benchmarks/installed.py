"""Cold ``dsh exec`` as an installed ``dsh`` runs: wheels built from this clone in a virtual environment
of their own (the README's "Installing without Hatch"), called through the ``dsh`` script pip installed.

    python benchmarks/installed.py [--rounds N]   # or as part of `hatch run bench` (not under --quick)

The rest of ``bench_cold`` runs ``python -m dsh.cli`` in the workspace environment, where every
distribution is an editable install (21 source folders on ``sys.path``). A user's ``dsh`` is neither:
this measures that one, against ``python -c pass`` of the same virtual environment. The script and
``python -m dsh.cli`` take turns with one deployment file in one home, as a user calling both would:
caches that evicted each other's entries would show here as two slow figures (see the dsh-cli
README's "Start-up memos"). Building the wheels takes a minute; ``build_wheels.py`` fetches the
third-party wheels through pip (its cache, else the package index), and the install then reads that
folder alone (``--no-index``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from curves import child_env, interleave

REPO = Path(__file__).resolve().parent.parent


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... exited {done.returncode}: {done.stderr.strip()[-2000:]}")


def installed_venv(tmp: Path) -> Path:
    """A virtual environment holding ``dsh-cli`` and ``dsh-persistence-sqlite`` installed from wheels."""
    wheels, venv = tmp / "wheels", tmp / "installed-venv"
    _run([sys.executable, str(REPO / "scripts" / "build_wheels.py"), str(wheels)])
    _run([sys.executable, "-m", "venv", str(venv)])
    # The venv's own pip script, as the README says: the dsh script then names the interpreter as
    # that pip's shebang does (python3 or python3.11), and python -m dsh.cli as python.
    pip = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--no-index"]
    _run([*pip, "--find-links", str(wheels), "dsh-cli", "dsh-persistence-sqlite"])
    return venv


def instructions(argv: list[str], env: Mapping[str, str]) -> int | None:
    """The instructions the process ``argv`` runs (valgrind's callgrind, children not followed); None without valgrind.

    Unlike wall time this does not move with the machine's load, so a change of a few percent in a
    cold command shows in one run. It counts no system call, page fault or disk wait.
    """
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    done = subprocess.run(
        [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Collected\s*:\s*([0-9]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind of {' '.join(argv[:3])} ... exited {done.returncode}: {done.stderr[-2000:]}")
    return int(found.group(1))


def _serve(script: str, env: Mapping[str, str]) -> subprocess.Popen[str]:
    """A ``dsh serve`` of the installed script, once it says it listens."""
    server = subprocess.Popen([script, "serve"], env=dict(env), stderr=subprocess.PIPE, text=True)
    first = server.stderr.readline() if server.stderr is not None else ""
    if not first.startswith("dsh serve: listening on"):
        server.kill()
        raise RuntimeError(f"dsh serve did not start: {first}")
    return server


def bench_installed(tmp: Path, rounds: int) -> dict[str, Any]:
    """Cold and served ``dsh exec -- true`` of an installed ``dsh``, built-in deployment and the README's SQLite file.

    Issue 40's ceilings: cold at most 8x and served at most 2x ``python -c pass``, both forms, in one run.
    """
    venv = installed_venv(tmp)
    python, script = str(venv / "bin" / "python"), str(venv / "bin" / "dsh")
    homes = {}
    for name in ("builtin", "file", "cold-builtin", "cold-file"):
        home = tmp / f"installed-{name}"
        home.mkdir(mode=0o700)
        homes[name] = home
    deployment = homes["file"] / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    deployment.chmod(0o600)
    plain = child_env(os.environ, DSH_HOME=str(homes["builtin"]))
    with_file = child_env(os.environ, DSH_HOME=str(homes["file"]), DSH_DEPLOYMENT=str(deployment))
    # Cold: the plain line, in homes no server listens for (it looks for one, as a user's cold exec does).
    cold = child_env(os.environ, DSH_HOME=str(homes["cold-builtin"]))
    cold_file = child_env(os.environ, DSH_HOME=str(homes["cold-file"]), DSH_DEPLOYMENT=str(deployment))
    exec_true = ["exec", "--", "true"]
    jobs: dict[str, tuple[list[str], Mapping[str, str]]] = {
        "python_pass": ([python, "-c", "pass"], plain),
        "exec": ([script, *exec_true], cold),
        "exec_deployment_file": ([script, *exec_true], cold_file),
        "exec_deployment_file_python_m": ([python, "-m", "dsh.cli", *exec_true], cold_file),
        "served_exec": ([script, *exec_true], plain),
        "served_exec_deployment_file": ([script, *exec_true], with_file),
    }
    servers = [_serve(script, plain), _serve(script, with_file)]
    try:
        med = interleave(jobs, rounds)
        # The same commands' instruction counts, once each (the caches warm from the rounds above).
        counts = {name: instructions(argv, env) for name, (argv, env) in jobs.items()}
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=30)
    floor = med["python_pass"]["ms"]
    key = {k: f"installed_{k}" if k.startswith("served") else f"installed_cold_{k}" for k in jobs}
    out: dict[str, Any] = {
        key[k]: {"median_ms": v["ms"], "floor_median_ms": floor, "ratio": v["ms"] / floor}
        for k, v in med.items()
        if k != "python_pass"
    }
    out["installed_cold_exec_deployment_file"]["over_builtin"] = med["exec_deployment_file"]["ms"] / med["exec"]["ms"]
    with open(script, encoding="utf-8") as handle:
        out["installed_cold_exec"]["script_shebang"] = handle.readline().strip()
    floor_count = counts.pop("python_pass")
    if floor_count is not None:
        for name, count in counts.items():
            assert count is not None
            out[key[name]]["instructions"] = count
            out[key[name]]["instructions_ratio"] = count / floor_count
        out["installed_cold_exec"]["floor_instructions"] = floor_count
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-installed-") as tmp:
        print(json.dumps(bench_installed(Path(tmp), args.rounds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
