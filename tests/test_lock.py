"""The lock (``constraints.txt``, written by ``hatch run lock``): every third-party requirement of the
project resolved, inside the ranges the distributions declare, and used by every install the project
makes for its own runs (issue 38 item 2)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import lock  # noqa: E402  (scripts/lock.py, not an installed module)


def _pinned_here() -> dict[str, str]:
    """name -> version of each pin that applies to this interpreter and platform."""
    found = {}
    for key, version in lock.pins(lock.LOCK).items():
        name, _, marker = key.partition(" (")
        if not marker or Marker(marker.rstrip(")")).evaluate():
            found[canonicalize_name(name)] = version
    return found


def test_every_third_party_requirement_is_pinned_inside_its_declared_range() -> None:
    pinned = _pinned_here()
    for text in [*lock.third_party_requirements(), *lock.TOOLS]:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} is required but not in constraints.txt; run `hatch run lock`"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {name}=={pinned[name]}, outside {text}; run `hatch run lock`"
        )


def test_the_lock_pins_exact_versions_and_no_workspace_distribution() -> None:
    text = lock.LOCK.read_text()
    requirements = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert requirements and all("==" in line for line in requirements), requirements
    names = {canonicalize_name(line.split("==")[0]) for line in requirements}
    assert not {n for n in names if n.startswith("dsh-")}, "the dsh-* distributions come from this clone"


def test_distributions_keep_ranges_not_pins() -> None:
    """The lock is for this project's runs; a user installing a distribution gets its honest range."""
    for folder in lock.distributions():
        for text in tomllib.loads((folder / "pyproject.toml").read_text())["project"].get("dependencies", []):
            requirement = Requirement(text)
            if canonicalize_name(requirement.name).startswith("dsh-"):
                continue  # the siblings are pinned to this release on purpose
            assert not any(s.operator in ("==", "===") for s in requirement.specifier), f"{folder.name}: {text}"


def test_every_install_of_the_project_takes_the_lock() -> None:
    readme = (REPO / "README.md").read_text()
    assert "pip install -c constraints.txt hatch && .venv/bin/hatch run test" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "-c constraints.txt hatch" in ci
    config = tomllib.loads((REPO / "hatch.toml").read_text())["envs"]["default"]
    assert config["env-vars"]["PIP_CONSTRAINT"] == "{root}/constraints.txt"
    for script in ("test_isolated.py", "build_wheels.py"):
        assert "chosen_lock()" in (REPO / "scripts" / script).read_text(), script


def test_newest_reports_each_pin_that_moved_appeared_or_went(tmp_path: Path) -> None:
    """What ``hatch run newest`` prints beside the suite's outcome (and ``hatch run lock`` after writing)."""
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    old.write_text("uv==0.13.9\n    # via -r x\nattrs==26.1.0\ncolorama==0.4.6 ; sys_platform == 'win32'\n")
    new.write_text("uv==0.13.10\nattrs==26.1.0\nidna==3.11\n")
    assert lock.changes(lock.pins(old), lock.pins(new)) == [
        "  colorama (sys_platform == 'win32'): 0.4.6 -> (none)",
        "  idna: (none) -> 3.11",
        "  uv: 0.13.9 -> 0.13.10",
    ]
