"""bash-env keeps its entry-point contributors in step with installed distributions."""

from __future__ import annotations

from pathlib import Path

from dsh.bash_env import BASH_ENV, BASH_ENV_GROUP
from dsh.core import FiberState
from dsh.loader import Runtime
from dsh.session import ToolExecution
from tests.helpers import harness, make_dist, remove_dist, touch_dir

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
        assert "DSH_RIVAL" not in registry.collect(CALL)
        assert _states(runtime) == {"bash-env:rival": "failed"}
        (warning,) = runtime.warnings()
        assert "rival-one 1.0 and rival-two 1.0" in warning

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
