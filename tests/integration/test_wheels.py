"""Installing without Hatch: the documented wheel folder installs any subset into a plain venv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration


def test_wheels_install_a_chosen_subset_without_an_index(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_wheels.py"), str(wheels)], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr[-3000:]
    root = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(root)
    # --no-index: everything comes from the folder, so no unrelated dsh-* from an index can slip in.
    installed = subprocess.run(
        [
            root / "bin" / "python",
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-index",
            "--find-links",
            wheels,
            "dsh-cli",
            "dsh-persistence-sqlite",
        ],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSH_")}
    env["DSH_HOME"] = str(tmp_path / "home")
    version = subprocess.run([root / "bin" / "dsh", "--version"], capture_output=True, text=True, env=env)
    names = [line.split()[0] for line in version.stdout.splitlines()]
    assert {"dsh-cli", "dsh-agent", "dsh-persistence-sqlite"} <= set(names) and "dsh-tool-pwsh" not in names
    deployment = tmp_path / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    ran = subprocess.run(
        [root / "bin" / "dsh", "exec", "--json", "--deployment", deployment, "--", "echo $DSH_SESSION_ID"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["stdout"].strip() == out["session_id"] and out["location"] is None
    # A contributor of one's own builds from the same folder alone: it holds the build backend too.
    pip = [root / "bin" / "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--find-links", wheels]
    example = subprocess.run(
        [*pip, REPO / "examples" / "dsh-example-region"],
        capture_output=True,
        text=True,
    )
    assert example.returncode == 0, example.stderr[-3000:]
    region = subprocess.run(
        [root / "bin" / "dsh", "exec", "--", "printenv DSH_EXAMPLE_REGION"], capture_output=True, text=True, env=env
    )
    assert (region.returncode, region.stdout) == (0, "eu-example-1\n"), region.stderr

    # The library apart from the application (issue 40): an integrator, and dsh-mcp, install no command.
    library = tmp_path / "library"
    venv.EnvBuilder(with_pip=True).create(library)
    lib_pip = [library / "bin" / "pip", *pip[1:]]
    assert subprocess.run([*lib_pip, "dsh-harness", "dsh-mcp"], capture_output=True, text=True).returncode == 0
    assert not (library / "bin" / "dsh").exists() and (library / "bin" / "dsh-mcp").exists()
    probe = (
        "import importlib.util\n"
        "from dsh.harness import Harness\n"
        "assert importlib.util.find_spec('dsh.cli') is None, 'dsh-cli came along'\n"
        "with Harness() as harness, harness.session(cwd='.') as session, session.turn() as turn:\n"
        "    print(turn.call('bash', {'command': 'echo $DSH_SESSION_ID'}).data['stdout'].strip() == session.id)\n"
    )
    embedded = subprocess.run([library / "bin" / "python", "-c", probe], capture_output=True, text=True, env=env)
    assert (embedded.returncode, embedded.stdout) == (0, "True\n"), embedded.stderr[-3000:]
