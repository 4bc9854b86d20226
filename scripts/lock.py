"""The project's lock: every third-party version its own runs install, resolved by ``uv pip compile``.

    python scripts/lock.py [--upgrade] [--upgrade-package NAME ...]   # hatch run lock: rewrite constraints.txt
    python scripts/lock.py --newest         # hatch run newest: the whole suite on the newest releases
    python scripts/lock.py --sync           # (hatch run test's first step) this environment to the lock

``constraints.txt`` (repository root) is a pip constraints file: one ``name==version`` line (with an
environment marker where a platform or Python needs another) for every third-party distribution
that any ``packages/*/pyproject.toml`` declares, that the Hatch workspace lists (``hatch.toml``'s
``dependencies``), and that Hatch itself needs (:data:`TOOLS`), resolved together, for every
platform and every Python from 3.11 (``--universal``). The distributions keep their honest ranges:
the lock is for the project's own runs (the README's commands, ``.ci/run``, each isolated test
environment, the wheel folder), never for a user who installs dsh.

Plain ``lock`` keeps every pin it can (uv prefers the versions already in the file) and only
resolves what changed in the inputs; ``--upgrade`` moves every pin to the newest release the ranges
allow. Either way the Hatch environment this runs in is brought to the new pins afterwards.

``--newest`` leaves ``constraints.txt`` alone: it resolves the newest releases into
``.venvs/newest/constraints.txt``, prints what moved (old -> new), then runs every step of the
``test`` script of ``hatch.toml`` in a fresh environment of its own (``.venvs/newest/env``) under
those versions, and ends with the versions that moved and the suite's outcome; exit status 0 only
when the suite passed.

The resolver is uv (``uv pip compile``): it reads each distribution's ``pyproject.toml`` itself,
resolves for every platform and Python at once (pip-tools' ``pip-compile`` resolves for the running
interpreter only), takes seconds, and is a single pinned binary (its version is itself in the lock,
through ``hatch.toml``). Standard library only, apart from running uv and pip.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "constraints.txt"
NEWEST = REPO / ".venvs" / "newest"
WORK = REPO / ".venvs" / "lock"
TOOLS = ["hatch>=1.16"]
"""What the README installs into ``.venv/`` before anything else: Hatch (and through it, its own needs)."""
PYTHON = "3.11"
"""The oldest Python every distribution supports (``requires-python``): the lock holds for it and every later one."""
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(;.*)?$")


def chosen_lock() -> Path:
    """The lock a run installs from: ``$PIP_CONSTRAINT`` naming one file (``hatch run newest``), else :data:`LOCK`.

    Hatch's workspace environment sets ``PIP_CONSTRAINT`` to :data:`LOCK` (``hatch.toml``), so pip
    takes the lock's versions for every install there; the scripts that make environments or wheels of
    their own (``test_isolated.py``, ``build_wheels.py``) pass it on explicitly with ``-c``.
    """
    named = os.environ.get("PIP_CONSTRAINT", "").split()
    chosen = Path(named[0]).resolve() if len(named) == 1 else LOCK
    if not chosen.is_file():
        raise SystemExit(f"the lock {chosen} does not exist; write it with `hatch run lock`")
    return chosen


def distributions() -> list[Path]:
    """The folder of every workspace distribution."""
    return sorted(p for p in (REPO / "packages").iterdir() if (p / "pyproject.toml").is_file())


def workspace_requirements() -> list[str]:
    """What the Hatch workspace environment lists beside the distributions, then :data:`TOOLS`."""
    config = tomllib.loads((REPO / "hatch.toml").read_text())
    return [*config["envs"]["default"]["dependencies"], *TOOLS]


def _uv() -> str:
    found = shutil.which("uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if found is None:
        raise SystemExit(
            "lock: uv is not installed in this environment; run this through Hatch (.venv/bin/hatch run lock), "
            "whose workspace environment installs the locked uv"
        )
    return found


def compile_lock(output: Path, *, upgrade: bool, packages: list[str]) -> None:
    """Resolve every input into ``output`` with ``uv pip compile`` (the distributions themselves left out)."""
    WORK.mkdir(parents=True, exist_ok=True)
    inputs = WORK / "workspace.in"
    dists = distributions()
    # Each distribution as a local editable requirement: uv reads its pyproject.toml, so the sibling
    # pins (dsh-core==0.1.0) resolve to the folders here and never to a package index.
    lines = [f"-e ./{d.relative_to(REPO)}" for d in dists] + workspace_requirements()
    inputs.write_text("\n".join(lines) + "\n")
    command = [_uv(), "pip", "compile", "--quiet", "--universal", "--python-version", PYTHON]
    command += ["--no-strip-markers", "--annotation-style", "split", "--custom-compile-command", "hatch run lock"]
    for dist in dists:
        command += ["--no-emit-package", dist.name]
    if upgrade:
        command.append("--upgrade")
    for name in packages:
        command += ["--upgrade-package", name]
    command += [str(inputs.relative_to(REPO)), "-o", str(output)]
    # uv takes its index from its own settings, never from pip's: the index is PyPI unless UV_INDEX_URL says otherwise.
    result = subprocess.run(command, cwd=REPO, check=False)
    if result.returncode != 0:
        raise SystemExit(f"lock: `uv pip compile` failed (exit {result.returncode}); {output} is unchanged")


def pins(path: Path) -> dict[str, str]:
    """``name (marker)`` -> version for every pin of a constraints file."""
    found = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line.strip())
        if match:
            name = match[1].lower().replace("_", "-")
            marker = (match[3] or "").lstrip("; ").strip()
            found[f"{name} ({marker})" if marker else name] = match[2]
    return found


def changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """One line per pin that moved, appeared or went away."""
    lines = []
    for name in sorted(old.keys() | new.keys()):
        before, after = old.get(name), new.get(name)
        if before != after:
            lines.append(f"  {name}: {before or '(none)'} -> {after or '(none)'}")
    return lines


def third_party_requirements() -> list[str]:
    """Every third-party requirement of the workspace environment: the distributions' and ``hatch.toml``'s."""
    found = []
    for dist in distributions():
        for requirement in tomllib.loads((dist / "pyproject.toml").read_text())["project"].get("dependencies", []):
            if not requirement.lower().startswith("dsh-"):
                found.append(requirement)
    config = tomllib.loads((REPO / "hatch.toml").read_text())
    return sorted({*found, *config["envs"]["default"]["dependencies"]})


def stale() -> tuple[list[str], list[Path]]:
    """What of the running environment differs from the lock and the workspace: (pins, distributions).

    A pin is stale when the environment holds another version of that name than the lock says for
    this interpreter and platform; a distribution when it is missing or its installed metadata
    (requirements, entry points, console scripts) differs from its ``pyproject.toml``, as an editable
    install made before that file changed does (its metadata is recorded at install time).
    """
    import importlib.metadata as metadata

    from packaging.markers import Marker  # in every environment that runs the tests (pytest needs it)
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned = []
    lock = chosen_lock()  # under `hatch run newest`, that run's own: never the repository's
    for key, version in pins(lock).items():
        name, _, marker = key.partition(" (")
        if marker and not Marker(marker.rstrip(")")).evaluate():
            continue
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # Hatch's own needs, another platform's: not this environment's
        if have != version:
            pinned.append(f"{name} {have} ({lock.name}: {version})")

    def requirement_set(texts: list[str]) -> set[tuple[str, ...]]:
        parsed = [Requirement(t) for t in texts]
        return {(canonicalize_name(r.name), *sorted(r.extras), str(r.specifier), str(r.marker)) for r in parsed}

    dists = []
    for folder in distributions():
        project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
        wanted_points = {(g, n, v) for g, group in project.get("entry-points", {}).items() for n, v in group.items()}
        wanted_points |= {("console_scripts", n, v) for n, v in project.get("scripts", {}).items()}
        try:
            installed = metadata.distribution(project["name"])
        except metadata.PackageNotFoundError:
            dists.append(folder)
            continue
        points = {(e.group, e.name, e.value) for e in installed.entry_points}
        requires = [r for r in installed.requires or [] if "extra ==" not in r]
        if points != wanted_points or requirement_set(requires) != requirement_set(project.get("dependencies", [])):
            dists.append(folder)
    return pinned, dists


def sync() -> int:
    """Bring the running (Hatch) environment to the lock and the workspace's metadata; quiet when it is there."""
    pinned, dists = stale()
    if not pinned and not dists:
        return 0
    for line in pinned:
        print(f"lock: {line}: installing the lock's versions", flush=True)
    for folder in dists:
        print(f"lock: {folder.name} is installed with other metadata than its pyproject.toml: reinstalling it")
    command = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(chosen_lock())]
    for folder in dists:
        command += ["-e", str(folder)]
    return subprocess.run([*command, *third_party_requirements()], check=False).returncode


def run_newest() -> int:
    """Resolve the newest releases, run the whole suite under them, report what moved and the outcome."""
    NEWEST.mkdir(parents=True, exist_ok=True)
    constraints = NEWEST / "constraints.txt"
    constraints.unlink(missing_ok=True)  # uv would prefer the versions it holds
    compile_lock(constraints, upgrade=True, packages=[])
    moved = changes(pins(LOCK), pins(constraints))
    print(f"newest releases against {LOCK.name}: {len(moved)} pin(s) differ", flush=True)
    print("\n".join(moved) or "  (none)", flush=True)
    env_dir = NEWEST / "env"
    shutil.rmtree(env_dir, ignore_errors=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    environ = dict(os.environ, PIP_CONSTRAINT=str(constraints), VIRTUAL_ENV=str(env_dir))
    environ["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
    environ.pop("PYTHONHOME", None)
    install = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(constraints)]
    for dist in distributions():
        install += ["-e", str(dist)]
    install += third_party_requirements()
    outcome = "passed"
    if subprocess.run(install, env=environ, check=False).returncode != 0:
        outcome = "FAILED: the newest releases do not install together (see pip's output above)"
    else:
        steps = tomllib.loads((REPO / "hatch.toml").read_text())["envs"]["default"]["scripts"]["test"]
        for step in steps:
            words = shlex.split(step.replace("{args}", ""))
            print(f"newest: {' '.join(words)}", flush=True)
            if subprocess.run(words, cwd=REPO, env=environ, check=False).returncode != 0:
                outcome = f"FAILED at `{' '.join(words)}`"
                break
    print(f"\nthe suite against the newest releases: {outcome}")
    print(f"pins that moved ({len(moved)}), as `hatch run lock --upgrade` would write them:")
    print("\n".join(moved) or "  (none)")
    return 0 if outcome == "passed" else 1


def main(argv: list[str] | None = None) -> int:
    """Rewrite the lock (default), or run the suite against the newest releases (``--newest``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upgrade", action="store_true", help="move every pin to the newest allowed release")
    parser.add_argument("--upgrade-package", action="append", default=[], metavar="NAME", help="move this pin only")
    parser.add_argument("--newest", action="store_true", help="run the whole suite against the newest releases")
    parser.add_argument("--sync", action="store_true", help="bring this environment to the lock (hatch run test does)")
    args = parser.parse_args(argv)
    if args.newest:
        return run_newest()
    if args.sync:
        return sync()
    before = pins(LOCK) if LOCK.is_file() else {}
    compile_lock(LOCK, upgrade=args.upgrade, packages=args.upgrade_package)
    moved = changes(before, pins(LOCK))
    print(f"{LOCK.name}: {len(moved)} pin(s) changed")
    print("\n".join(moved) or "  (none)")
    if moved and os.environ.get("HATCH_ENV_ACTIVE"):
        return sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())
