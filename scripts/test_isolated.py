"""Run each distribution's tests with only that distribution and what it declares installed.

    python3 scripts/test_isolated.py [DIST ...] [--jobs N] [--fresh]

For each distribution in ``packages/`` (or those named), a virtual environment under
``.venvs/isolated/<dist>`` gets exactly:

- that distribution and the transitive closure of its declared ``dsh-*`` dependencies, as wheels
  built from their workspace folders and installed with ``--no-deps`` (never from an index: the
  ``dsh-*`` names are not ours there);
- the third-party requirements those distributions declare, from their own specifiers, at the
  versions of the lock (``constraints.txt``, see ``scripts/lock.py``; ``$PIP_CONSTRAINT`` names
  another, as ``hatch run newest`` does, and then the environments live in a folder of their own);
- ``dsh-testing`` (the test utility: pytest, hypothesis and the shared fixtures);

then ``packages/<dist>/tests`` runs in it. A test that imports something its distribution does not
declare fails here, where the full workspace environment would hide it.

An environment is reused while its inputs are unchanged: the interpreter, this script, the lock, and
the ``pyproject.toml`` of every distribution installed into it; any change there rebuilds it from
scratch (``--fresh`` rebuilds all). The ``dsh-*`` wheels are built anew on every run (with hatchling
when the running interpreter has it, a fraction of a second each) and reinstalled into an
environment whenever one of its wheels differs from what it holds, so an environment never runs
stale code. One line per distribution
is printed; the exit status is 1 if any failed. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
import time
import tomllib
import venv
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lock import LOCK, chosen_lock  # scripts/lock.py, beside this file

REPO = Path(__file__).resolve().parent.parent
PACKAGES = REPO / "packages"
WHEELS = REPO / ".venvs" / "wheels"
TEST_UTILITY = "dsh-testing"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Dist:
    """One workspace distribution: its name, folder and declared requirements."""

    name: str
    path: Path
    requires: tuple[str, ...]

    @property
    def siblings(self) -> list[str]:
        """The declared ``dsh-*`` dependencies (workspace distributions)."""
        return [_requirement_name(r) for r in self.requires if _requirement_name(r).startswith("dsh-")]

    @property
    def third_party(self) -> list[str]:
        """The declared requirements that are not workspace distributions, as written."""
        return [r for r in self.requires if not _requirement_name(r).startswith("dsh-")]


def _requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement.strip())
    if match is None:
        raise SystemExit(f"cannot read the requirement {requirement!r}")
    return match.group(0).lower().replace("_", "-")


def workspace() -> dict[str, Dist]:
    """Every distribution in ``packages/`` by name."""
    found = {}
    for folder in sorted(PACKAGES.iterdir()):
        meta_file = folder / "pyproject.toml"
        if meta_file.is_file():
            project = tomllib.loads(meta_file.read_text())["project"]
            found[project["name"]] = Dist(project["name"], folder, tuple(project.get("dependencies", [])))
    return found


def closure(name: str, dists: dict[str, Dist]) -> list[Dist]:
    """``name`` and every workspace distribution it needs, directly or not, sorted by name."""
    seen: dict[str, Dist] = {}
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        if current not in dists:
            raise SystemExit(f"{name} needs {current}, which is not a distribution in {PACKAGES}")
        seen[current] = dists[current]
        todo.extend(dists[current].siblings)
    return sorted(seen.values(), key=lambda d: d.name)


def venvs(lock: Path) -> Path:
    """Where the environments live: one folder per lock, so a run on another lock leaves these as they are."""
    if lock == LOCK:  # the repository's own
        return REPO / ".venvs" / "isolated"
    return REPO / ".venvs" / f"isolated-{hashlib.sha256(str(lock).encode()).hexdigest()[:8]}"


def _key(installed: list[Dist], lock: Path) -> str:
    digest = hashlib.sha256()
    digest.update(sys.version.encode())
    digest.update(str(REPO).encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(lock.read_bytes())
    for dist in installed:
        digest.update(dist.name.encode())
        digest.update((dist.path / "pyproject.toml").read_bytes())
    return digest.hexdigest()


def _run(command: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"`{' '.join(command[:4])} ...` failed (exit {result.returncode}); see {log}")


def build_wheels(dists: list[Dist]) -> dict[str, Path]:
    """A fresh wheel of each distribution, by name (hatchling in-process when available, else pip)."""
    shutil.rmtree(WHEELS, ignore_errors=True)
    WHEELS.mkdir(parents=True)
    log = WHEELS / "build.log"
    with_hatchling = importlib.util.find_spec("hatchling") is not None
    built = {}
    for dist in dists:
        out = WHEELS / dist.name
        if with_hatchling:
            command = [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)]
            with log.open("a") as sink:
                result = subprocess.run(command, cwd=dist.path, stdout=sink, stderr=subprocess.STDOUT, check=False)
            if result.returncode != 0:
                raise SystemExit(f"building the wheel of {dist.name} failed; see {log}")
        else:
            _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(dist.path)], log)
        (wheel,) = out.glob("*.whl")
        built[dist.name] = wheel
    return built


def prepare(dist: Dist, dists: dict[str, Dist], wheels: dict[str, Path], fresh: bool, lock: Path) -> tuple[Path, bool]:
    """The environment for ``dist``'s tests, built unless a current one exists; (python, reused)."""
    installed = [*closure(dist.name, dists), *(d for d in closure(TEST_UTILITY, dists) if d.name != dist.name)]
    installed = sorted({d.name: d for d in installed}.values(), key=lambda d: d.name)
    key = _key(installed, lock)
    home = venvs(lock) / dist.name
    python = home / "bin" / "python"
    stamp = home / ".dsh-inputs"
    log = home / "install.log"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check", "-q"]
    reused = not fresh and python.exists() and stamp.is_file() and stamp.read_text() == key
    if not reused:
        shutil.rmtree(home, ignore_errors=True)
        venv.EnvBuilder(with_pip=False, clear=True).create(home)
        third_party = sorted({r for d in installed for r in d.third_party})
        _run([*pip, "install", "-c", str(lock), *third_party], log)
        stamp.write_text(key)
    ours = [wheels[d.name] for d in installed]
    ours_key = hashlib.sha256(b"".join(w.read_bytes() for w in ours)).hexdigest()
    ours_stamp = home / ".dsh-wheels"
    if not (ours_stamp.is_file() and ours_stamp.read_text() == ours_key):
        _run([*pip, "install", "--no-deps", "--force-reinstall", *map(str, ours)], log)
        ours_stamp.write_text(ours_key)
    return python, reused


def run_one(dist: Dist, dists: dict[str, Dist], wheels: dict[str, Path], fresh: bool, lock: Path) -> tuple[bool, str]:
    """Prepare and run one distribution's tests; (passed, the line to print)."""
    started = time.monotonic()
    try:
        python, reused = prepare(dist, dists, wheels, fresh, lock)
    except RuntimeError as exc:
        return False, f"{dist.name:<26} FAILED  environment: {exc}"
    ready = time.monotonic()
    report = venvs(lock) / dist.name / "pytest.log"
    # The root's pythonpath (for its `tests.*` helpers) is dropped: a distribution's tests see only what is installed.
    command = [str(python), "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(REPO / "pytest.ini")]
    command += ["-o", "pythonpath="]
    with report.open("w") as out:
        result = subprocess.run(
            [*command, "--rootdir", str(REPO), str(dist.path / "tests")],
            cwd=dist.path,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    done = time.monotonic()
    lines = [line for line in report.read_text().splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else "no output"
    env = "reused" if reused else f"built {ready - started:.0f}s"
    status = "ok" if result.returncode == 0 else "FAILED"
    line = f"{dist.name:<26} {status:<7} {summary} (env {env}, tests {done - ready:.1f}s)"
    if result.returncode != 0:
        line += f"\n{'':<26} see {report}"
    return result.returncode == 0, line


def main(argv: list[str] | None = None) -> int:
    """Run the chosen distributions' tests, each in its own environment; 0 when all pass."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dists", nargs="*", help="distribution names (default: every one with a tests/ folder)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="distributions run at once (default 2)")
    parser.add_argument("--fresh", action="store_true", help="rebuild every environment")
    args = parser.parse_args(argv)
    dists = workspace()
    unknown = [name for name in args.dists if name not in dists]
    if unknown:
        parser.error(f"no distribution named {', '.join(unknown)} in {PACKAGES}")
    chosen = (
        [dists[n] for n in args.dists] if args.dists else [d for d in dists.values() if (d.path / "tests").is_dir()]
    )
    lock = chosen_lock()
    venvs(lock).mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    wheels = build_wheels(list(dists.values()))
    failed = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for ok, line in pool.map(lambda d: run_one(d, dists, wheels, args.fresh, lock), chosen):
            failed += not ok
            print(line, flush=True)
    print(
        f"{len(chosen) - failed} of {len(chosen)} distributions passed in isolation ({time.monotonic() - started:.0f}s)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
