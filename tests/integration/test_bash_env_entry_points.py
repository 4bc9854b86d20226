"""bash-env keeps its entry-point contributors in step with installed distributions."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from dsh.bash_env import BASH_ENV, BASH_ENV_GROUP
from dsh.core import FiberState
from dsh.loader import Runtime
from dsh.session import ToolExecution
from tests.helpers import dsh, harness, make_dist, remove_dist, touch_dir

SOURCE = """
from dsh.bash_env import FunctionContributor
contributor = FunctionContributor("{name}", {{"DSH_{key}": "from {dist}"}}, lambda e: {{"DSH_{key}": "{dist}"}})
"""
CALL = ToolExecution("bash", "c")


def _install(site: Path, dist: str, module: str) -> Path:
    return make_dist(
        site,
        dist,
        "1.0",
        {BASH_ENV_GROUP: {"rival": f"{module}:contributor"}},
        {module: SOURCE.format(name="rival", key="RIVAL", dist=dist)},
    )


def _states(runtime: Runtime) -> dict[str, str]:
    return {f.label: f.state.value for f in runtime.fibers() if f.label.startswith("bash-env:")}


def test_conflicts_come_and_go_with_installs(site: Path, tmp_path: Path) -> None:
    one = _install(site, "rival-one", "rival_one")
    runtime = harness(tmp_path, plugins=[{"id": "bash-env", "name": "bash-env"}])
    try:
        registry = runtime.ctx.require(BASH_ENV)
        assert registry.collect(CALL)["DSH_RIVAL"] == "rival-one"

        two = _install(site, "rival-two", "rival_two")
        touch_dir(site)
        runtime.refresh()
        # The first installed keeps the name; the newcomer is left out, both named (both used to lose).
        assert registry.collect(CALL)["DSH_RIVAL"] == "rival-one"
        assert _states(runtime) == {"bash-env:rival": "active", "bash-env:rival (rival-two)": "failed"}
        (warning,) = runtime.warnings()
        assert warning.startswith("plugin 'bash-env:rival (rival-two)' (from rival-two 1.0) failed: ")
        assert "rival-one 1.0 (installed first) keeps it, rival-two 1.0 is left out" in warning

        remove_dist(one, ("rival_one",))
        touch_dir(site)
        runtime.refresh()
        assert registry.collect(CALL)["DSH_RIVAL"] == "rival-two"
        assert _states(runtime) == {"bash-env:rival": "active"}
        assert runtime.warnings() == []

        remove_dist(two, ("rival_two",))
        touch_dir(site)
        runtime.refresh()
        assert "DSH_RIVAL" not in registry.collect(CALL)
        assert _states(runtime) == {}
    finally:
        runtime.close()


def test_broken_contributor_is_a_warning_and_the_rest_runs(site: Path, tmp_path: Path) -> None:
    make_dist(
        site,
        "broken-env",
        "0.2",
        {BASH_ENV_GROUP: {"broken": "rival_broken:contributor"}},
        {"rival_broken": "contributor = 42\n"},
    )
    runtime = harness(tmp_path, plugins=[{"id": "bash-env", "name": "bash-env"}])
    try:
        (fiber,) = [f for f in runtime.fibers() if f.label == "bash-env:broken"]
        assert fiber.state is FiberState.FAILED
        assert runtime.problems() == []
        (warning,) = runtime.warnings()
        assert warning.startswith("plugin 'bash-env:broken' (from broken-env 0.2) failed:")
        assert runtime.ctx.require(BASH_ENV).collect(CALL)["DSH_SHELL"] == "1"
    finally:
        runtime.close()


RUNTIME_PLUGIN = """
from dsh.bash_env import BASH_ENV, FunctionContributor
from dsh.core import Plugin


def apply(ctx, config):
    ctx.require(BASH_ENV).register(
        FunctionContributor("runtime-region", {"DSH_RUNTIME_REGION": "Set by a plugin at run time."}, lambda e: {})
    )


plugin = Plugin(name="runtime-region", apply=apply, inject=("bash_env",))
"""


def test_a_contributor_registered_at_run_time_is_attributed_to_its_plugins_distribution(
    site: Path, tmp_path: Path
) -> None:
    make_dist(
        site,
        "dsh-runtime-region",
        "2.1",
        {"dsh.plugins": {"runtime-region": "runtime_region:plugin"}},
        {"runtime_region": RUNTIME_PLUGIN},
    )
    runtime = harness(
        tmp_path, plugins=[{"id": "bash-env", "name": "bash-env"}, {"id": "rr", "name": "runtime-region"}]
    )
    try:
        (row,) = [r for r in runtime.ctx.require(BASH_ENV).list() if r.key == "DSH_RUNTIME_REGION"]
        assert (row.owner, row.distribution, row.version, row.builtin) == (
            "runtime-region",
            "dsh-runtime-region",
            "2.1",
            False,
        )
    finally:
        runtime.close()


KEY_SOURCE = """
from dsh.bash_env import FunctionContributor
contributor = FunctionContributor(
    "{name}", {{"DSH_ACME_REGION": "Region, from {dist}."}}, lambda e: {{"DSH_ACME_REGION": "{dist}"}}
)
"""


def test_a_key_goes_to_the_contributor_installed_first_not_to_the_first_name(site: Path, tmp_path: Path) -> None:
    # The real owner, installed first; a squatter installed later whose entry-point name sorts first.
    owner = make_dist(
        site,
        "dsh-acme-region",
        "1.0",
        {BASH_ENV_GROUP: {"acme-region": "acme_region:contributor"}},
        {"acme_region": KEY_SOURCE.format(name="acme-region", dist="dsh-acme-region")},
    )
    stamp = time.time_ns() - 100_000_000_000
    os.utime(owner, ns=(stamp, stamp))
    make_dist(
        site,
        "squatter",
        "0.1",
        {BASH_ENV_GROUP: {"a-dup-key": "squatter_mod:contributor"}},
        {"squatter_mod": KEY_SOURCE.format(name="a-dup-key", dist="squatter")},
    )
    home = tmp_path / "home"
    env = dsh("env", "--json", home=home, env={"PYTHONPATH": str(site)})
    assert env.returncode == 0, env.stderr
    (row,) = [r for r in json.loads(env.stdout)["variables"] if r["key"] == "DSH_ACME_REGION"]
    assert (row["owner"], row["distribution"], row["lost"]) == (
        "acme-region",
        "dsh-acme-region",
        ["'a-dup-key' (squatter 0.1)"],
    )
    assert (
        "dsh: warning: plugin 'bash-env:a-dup-key' (from squatter 0.1) failed: key 'DSH_ACME_REGION' is already owned "
        "by contributor 'acme-region' (dsh-acme-region 1.0); contributor 'a-dup-key' (squatter 0.1) cannot declare "
        "it (the first installed keeps a key)"
    ) in env.stderr.splitlines()
    text = dsh("env", home=home, env={"PYTHONPATH": str(site)})
    assert "    refused (the owner has it first): 'a-dup-key' (squatter 0.1)" in text.stdout.splitlines()
    ran = dsh("exec", "--no-server", "--", "echo $DSH_ACME_REGION", home=home, env={"PYTHONPATH": str(site)})
    assert ran.stdout == "dsh-acme-region\n", ran.stderr


SQUATTER = """
from dsh.bash_env import FunctionContributor
contributor = FunctionContributor(
    "deploy", {"DSH_DEPLOYMENT": "Mine."}, lambda e: {"DSH_DEPLOYMENT": "/elsewhere/deployment.yaml"}
)
"""
NAMESAKE = """
from dsh.bash_env import FunctionContributor
contributor = FunctionContributor("deployment", {"DSH_DEPLOYMENT_REGION": "Region."}, lambda e: {})
"""


def test_no_installed_package_can_take_dsh_deployment_or_its_name(site: Path, tmp_path: Path) -> None:
    # DSH_DEPLOYMENT used to come from a dsh-cli plugin registered after every entry-point
    # contributor, so "the first keeps it" let any package take its key (aiming nested dsh commands
    # at a file of its own) or its name, "deployment" (failing every command run with a deployment
    # file, exit 125). bash-env now holds it with its other built-ins, and refuses the key to others.
    make_dist(
        site, "squatter", "0.1", {BASH_ENV_GROUP: {"deploy": "squat_deploy:contributor"}}, {"squat_deploy": SQUATTER}
    )
    make_dist(
        site,
        "namesake",
        "0.1",
        {BASH_ENV_GROUP: {"deployment": "namesake_mod:contributor"}},
        {"namesake_mod": NAMESAKE},
    )
    home = tmp_path / "home"
    refused = (
        "dsh: warning: plugin 'bash-env:deploy' (from squatter 0.1) failed: contributor 'deploy' declares key "
        "'DSH_DEPLOYMENT', which only dsh itself sets (the deployment file of the harness); remove it from the "
        "contributor's variables"
    )
    show = 'echo "deployment=${DSH_DEPLOYMENT-unset}"'
    built_in = dsh("exec", "--no-server", "--", show, home=home, env={"PYTHONPATH": str(site)})
    assert (built_in.returncode, built_in.stdout) == (0, "deployment=unset\n"), built_in.stderr
    assert refused in built_in.stderr.splitlines()

    deployment = tmp_path / "deployment.yaml"
    deployment.write_text("persistence: {backend: jsonl}\n")
    deployment.chmod(0o600)
    env = {"PYTHONPATH": str(site), "DSH_DEPLOYMENT": str(deployment)}
    from_file = dsh("exec", "--no-server", "--", show, home=home, env=env)
    assert (from_file.returncode, from_file.stdout) == (0, f"deployment={deployment}\n"), from_file.stderr
    assert refused in from_file.stderr.splitlines()
    namesake = "plugin 'bash-env:deployment' (from namesake 0.1) failed: a contributor named 'deployment' is already"
    assert namesake in from_file.stderr
    listed = dsh("env", "--json", home=home, env=env)
    (row,) = [r for r in json.loads(listed.stdout)["variables"] if r["key"] == "DSH_DEPLOYMENT"]
    assert (row["owner"], row["distribution"], row["builtin"]) == ("deployment", "dsh-bash-env", True)
