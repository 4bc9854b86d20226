"""Real pip install / uninstall of third-party distributions into a temporary virtual environment."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import dsh

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "examples" / "dsh-example-region"

LIVE = textwrap.dedent(
    """
    import json, sys
    from dsh.harness import open_runtime
    from dsh.bash_env import BASH_ENV
    from dsh.session import AgentRef, SessionHeader, ToolExecution
    runtime = open_runtime()
    registry = runtime.ctx.require(BASH_ENV)
    call = ToolExecution("bash", "c", agent=AgentRef("main", SessionHeader(id="s", cwd="/")))

    def report():
        fibers = {f.label: f.state.value for f in runtime.fibers() if f.label.startswith("bash-env:")}
        print(json.dumps({"keys": [v.key for v in registry.list()], "snapshot": dict(registry.collect(call)),
                          "fibers": fibers}), flush=True)

    report()
    for line in sys.stdin:
        runtime.refresh()
        report()
    runtime.close()
    """
)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv that sees this workspace's packages through a site directory, and nothing of the example."""
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(root)
    python = root / "bin" / "python"
    site = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    # addsitedir also runs the editable-install .pth files of the workspace's site-packages.
    (Path(site) / "workspace.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return python


def _pip(python: Path, *args: str) -> None:
    subprocess.run(
        [python, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True, capture_output=True, text=True
    )


def _tiny_dist(tmp_path: Path, name: str, group: str, entry: str) -> Path:
    src = tmp_path / name
    module = name.replace("-", "_")
    (src / module).mkdir(parents=True)
    (src / module / "__init__.py").write_text(
        "from dsh.bash_env import FunctionContributor\n"
        f"contributor = FunctionContributor('rival', {{'DSH_RIVAL': 'r'}}, lambda e: {{'DSH_RIVAL': '{name}'}})\n"
    )
    (src / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        f'[project]\nname = "{name}"\nversion = "0.3.0"\n'
        f'[project.entry-points."{group}"]\n{entry} = "{module}:contributor"\n'
        f'[tool.hatch.build.targets.wheel]\npackages = ["{module}"]\n'
    )
    return src


def test_install_discover_run_uninstall(env: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    before = json.loads(dsh("env", "--json", home=home, python=str(env)).stdout)
    assert "DSH_EXAMPLE_REGION" not in [r["key"] for r in before["variables"]]

    _pip(env, "install", "--no-deps", "--no-build-isolation", str(EXAMPLE))
    try:
        plugins = json.loads(dsh("plugins", "--json", home=home, python=str(env)).stdout)["plugins"]
        ours = {(r["group"], r["name"]): r for r in plugins if r["distribution"] == "dsh-example-region"}
        assert set(ours) == {("dsh.plugins", "example-region"), ("dsh.bash_env", "example-region")}
        assert all(r["version"] == "0.1.0" for r in ours.values())
        assert ours[("dsh.bash_env", "example-region")]["state"] == "active"
        assert ours[("dsh.plugins", "example-region")]["state"] == "not loaded"

        rows = {r["key"]: r for r in json.loads(dsh("env", "--json", home=home, python=str(env)).stdout)["variables"]}
        region = rows["DSH_EXAMPLE_REGION"]
        assert (region["owner"], region["distribution"], region["version"], region["builtin"]) == (
            "example-region",
            "dsh-example-region",
            "0.1.0",
            False,
        )
        printed = dsh(
            "exec", "--", "printenv", "DSH_EXAMPLE_REGION", home=home, python=str(env), env={"EXAMPLE_REGION": "mars-1"}
        )
        assert printed.returncode == 0 and printed.stdout == "mars-1\n"
    finally:
        _pip(env, "uninstall", "-y", "dsh-example-region")

    after = json.loads(dsh("env", "--json", home=home, python=str(env)).stdout)
    assert "DSH_EXAMPLE_REGION" not in [r["key"] for r in after["variables"]]
    gone = dsh("exec", "--", "printenv", "DSH_EXAMPLE_REGION", home=home, python=str(env))
    assert gone.returncode == 1 and gone.stdout == ""


def test_refresh_in_a_running_process_follows_uninstall(env: Path, tmp_path: Path) -> None:
    _pip(env, "install", "--no-deps", "--no-build-isolation", str(EXAMPLE))
    proc = subprocess.Popen(
        [env, "-c", LIVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"DSH_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        first = json.loads(proc.stdout.readline())
        assert "DSH_EXAMPLE_REGION" in first["keys"] and first["snapshot"]["DSH_EXAMPLE_REGION"] == "eu-example-1"
        assert first["fibers"] == {"bash-env:example-region": "active"}
        _pip(env, "uninstall", "-y", "dsh-example-region")
        proc.stdin.write("refresh\n")
        proc.stdin.flush()
        second = json.loads(proc.stdout.readline())
        assert "DSH_EXAMPLE_REGION" not in second["keys"]
        assert "DSH_EXAMPLE_REGION" not in second["snapshot"]
        assert second["fibers"] == {}, "the contributor's fiber was disposed"
        _pip(env, "install", "--no-deps", "--no-build-isolation", str(EXAMPLE))
        proc.stdin.write("refresh\n")
        proc.stdin.flush()
        third = json.loads(proc.stdout.readline())
        assert "DSH_EXAMPLE_REGION" in third["keys"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        subprocess.run(
            [env, "-m", "pip", "uninstall", "-y", "-q", "dsh-example-region"], capture_output=True, check=False
        )
    assert proc.returncode == 0, proc.stderr.read()  # type: ignore[union-attr]


def test_two_distributions_claiming_one_name(env: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _tiny_dist(tmp_path, "dsh-rival-one", "dsh.bash_env", "rival")
    second = _tiny_dist(tmp_path, "dsh-rival-two", "dsh.bash_env", "rival")
    # Two pip runs, so "installed first" is a fact, not a race between two dist-info directories.
    _pip(env, "install", "--no-deps", "--no-build-isolation", str(second))
    _pip(env, "install", "--no-deps", "--no-build-isolation", str(first))
    try:
        out = json.loads(dsh("plugins", "--json", home=home, python=str(env)).stdout)
        rows = {r["distribution"]: r for r in out["plugins"] if r["name"] == "rival"}
        assert set(rows) == {"dsh-rival-one", "dsh-rival-two"}
        # The first installed keeps the name; the other is a failed row naming both and the fix.
        assert rows["dsh-rival-two"]["state"] == "active"
        assert rows["dsh-rival-one"]["state"] == "failed"
        error = rows["dsh-rival-one"]["error"]
        assert "dsh-rival-two 0.3.0 (installed first) keeps it" in error
        assert "dsh-rival-one 0.3.0 is left out" in error and "uninstall one of them" in error
        run = dsh("exec", "--", "echo $DSH_RIVAL", home=home, python=str(env))
        assert run.returncode == 0 and run.stdout == "dsh-rival-two\n", run.stderr
        assert "dsh-rival-one 0.3.0 is left out" in run.stderr
    finally:
        _pip(env, "uninstall", "-y", "dsh-rival-one", "dsh-rival-two")


def test_the_venv_has_no_example_left(env: Path) -> None:
    listed = subprocess.run([env, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True)
    assert "dsh-example-region" not in [p["name"] for p in json.loads(listed.stdout)]
    assert sys.prefix != str(env.parent.parent)
