"""The monorepo's shape: a PEP 420 namespace, typed leaf packages, one workspace."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from tests.conftest import REPO

PACKAGES = sorted(p for p in (REPO / "packages").iterdir() if p.is_dir())


def test_there_is_one_distribution_per_planned_package() -> None:
    assert [p.name for p in PACKAGES] == [
        "dsh-agent",
        "dsh-bash",
        "dsh-bash-env",
        "dsh-core",
        "dsh-hooks",
        "dsh-paths",
        "dsh-persistence-jsonl",
        "dsh-persistence-sqlite",
        "dsh-session",
        "dsh-tool-bash",
        "dsh-tool-pwsh",
    ]


def test_no_distribution_ships_a_namespace_init() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for pkg in PACKAGES
        for p in (pkg / "src" / "dsh" / "__init__.py", pkg / "src" / "dsh" / "persistence" / "__init__.py")
        if p.exists()
    ]
    assert offenders == []


def test_every_leaf_package_is_typed_documented_and_built_from_src_dsh() -> None:
    for pkg in PACKAGES:
        meta = tomllib.loads((pkg / "pyproject.toml").read_text())
        assert meta["project"]["name"] == pkg.name
        assert meta["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/dsh"]
        assert meta["project"]["name"] != "dsh"
        readme = (pkg / "README.md").read_text()
        assert len(readme) > 400, f"{pkg.name} README is a stub"
        leaves = [d for d in (pkg / "src" / "dsh").rglob("*") if d.is_dir() and (d / "__init__.py").exists()]
        assert leaves, f"{pkg.name} has no package"
        for leaf in leaves:
            assert (leaf / "py.typed").exists(), f"{leaf} lacks py.typed"


def test_hatch_workspace_covers_packages() -> None:
    config = tomllib.loads((REPO / "hatch.toml").read_text())
    assert config["envs"]["default"]["workspace"]["members"] == ["packages/*"]


def test_imports_only_go_down_the_layers() -> None:
    order = ["core", "paths", "session", "persistence", "bash", "bash_env", "tool_bash", "tool_pwsh", "hooks", "agent"]
    rank = {name: i for i, name in enumerate(order)}
    allowed_up = {("core", "paths")}  # the kernel resolves the home through dsh.paths
    for pkg in PACKAGES:
        for source in (pkg / "src" / "dsh").rglob("*.py"):
            own = source.relative_to(pkg / "src" / "dsh").parts[0]
            for line in source.read_text().splitlines():
                words = line.split()
                if len(words) >= 2 and words[0] in ("from", "import") and words[1].startswith("dsh."):
                    target = words[1].split(".")[1]
                    if target == "paths" and own != "paths":
                        continue
                    assert rank[target] <= rank[own] or (own, target) in allowed_up, f"{source}: {line.strip()}"
    # dsh.paths imports nothing of ours.
    paths_src = (REPO / "packages/dsh-paths/src/dsh/paths/__init__.py").read_text()
    assert "from dsh." not in paths_src and "import dsh" not in paths_src


def test_lazy_agent_exports_resolve() -> None:
    import dsh.agent

    for name in dsh.agent.__all__:
        assert getattr(dsh.agent, name) is not None
    assert sorted(dsh.agent.__all__) == sorted(dsh.agent._EXPORTS)


def test_a_clone_with_nothing_beside_it_collects_the_whole_suite(tmp_path: Path) -> None:
    """The suite carries its own data: a copy of the repository alone in a folder collects cleanly."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    clone = tmp_path / "alone" / "dsh"
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    assert not (clone.parent / "shared").exists()
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=clone,
        capture_output=True,
        text=True,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    assert " tests collected" in collected.stdout or " test collected" in collected.stdout


def test_internal_dependencies_are_pinned_to_the_release() -> None:
    """The distributions release together: each names its siblings at exactly their shared version."""
    versions = {meta["project"]["name"]: meta["project"]["version"] for meta in map(_meta, PACKAGES)}
    assert len(set(versions.values())) == 1, versions
    for pkg in PACKAGES:
        for requirement in _meta(pkg)["project"].get("dependencies", []):
            name = requirement.split("=")[0].split(">")[0].split("<")[0].strip()
            if name in versions:
                assert requirement == f"{name}=={versions[name]}", f"{pkg.name}: {requirement}"


def _meta(pkg: Path) -> dict[str, Any]:
    return tomllib.loads((pkg / "pyproject.toml").read_text())
