"""docs/extension-points/ runs: each page's minimal third-party distribution is installed and its commands run.

The page's blocks are taken in order, as a reader goes. One with a ``file=PATH`` info string
(```` ```python file=acme.py ````) is written at PATH in one scratch project folder, and
``file=pyproject.toml`` is installed as pip would (a ``.dist-info`` with its name, version, summary and
entry points, beside the modules; the folder on ``PYTHONPATH``). A plain ``bash`` block runs in that
folder with this installation's ``dsh`` first on ``PATH`` and a fresh ``DSH_HOME``: its ``test`` and
``grep`` lines are its checks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import make_dist

pytestmark = pytest.mark.integration

PAGES = REPO / "docs" / "extension-points"
INDEX = PAGES / "README.md"
BLOCK = re.compile(r"^```(\w+)(?: file=(\S+))?\n(.*?)^```$", re.M | re.S)
GROUP = re.compile(r'^[A-Z_]*GROUP = "(dsh\.[a-z_]+)"', re.M)


def _groups() -> set[str]:
    """Every entry-point group dsh's sources name (``*_GROUP = "dsh...."`` constants)."""
    return {m for source in REPO.glob("packages/*/src/**/*.py") for m in GROUP.findall(source.read_text())}


def _index() -> dict[str, str]:
    """group -> page, from the index's table rows (``| `dsh.x` | [title](page.md) | ...``)."""
    rows = re.findall(r"^\| `(dsh\.[a-z_]+)` \| \[[^]]+\]\(([a-z-]+\.md)\)", INDEX.read_text(), re.M)
    return dict(rows)


def _runnable() -> list[Path]:
    return sorted(p for p in PAGES.glob("*.md") if "file=pyproject.toml" in p.read_text())


def test_every_entry_point_group_has_a_page_linked_from_the_index() -> None:
    index = _index()
    groups = _groups()
    assert {"dsh.plugins", "dsh.bash_env", "dsh.persistence", "dsh.skills", "dsh.models", "dsh.commands"} <= groups
    for group in groups:
        assert group in index, f"the index lists no page for {group}"
        page = PAGES / index[group]
        assert page.exists(), f"{page} (the page of {group}) does not exist"
        assert f"`{group}`" in page.read_text().splitlines()[0], f"{page}'s title does not name {group}"
    linked = set(index.values())
    for page in PAGES.glob("*.md"):
        assert page == INDEX or page.name in linked, f"{page} is not linked from the index"
    for page in _runnable():
        text = page.read_text()
        for part in ("## The contract", "## A minimal third-party distribution", "## When the plugin misbehaves"):
            assert part in text, f"{page.name} has no '{part}' section"


@pytest.mark.parametrize("page", _runnable(), ids=lambda p: p.stem)
def test_the_page_s_example_installs_and_runs(page: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSH_")}
    env |= {"DSH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(project)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    ran = 0
    for language, name, code in BLOCK.findall(page.read_text()):  # in the page's order, as a reader goes
        if name == "pyproject.toml":
            meta = tomllib.loads(code)["project"]
            info = make_dist(project, meta["name"], meta["version"], meta.get("entry-points", {}))
            if meta.get("description"):
                metadata = info / "METADATA"
                metadata.write_text(metadata.read_text() + f"Summary: {meta['description']}\n")
        elif name:
            target = project / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code)
        elif language == "bash":
            ran += 1
            run = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert run.returncode == 0, (
                f"{page.name}, bash block {ran}:\n{code}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
            )
    assert ran, f"{page.name} shows no commands to run its example"
