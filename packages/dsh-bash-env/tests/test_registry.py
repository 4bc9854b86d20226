from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

import dsh.loader
from dsh.bash_env import (
    BASH_ENV,
    BashEnvConfig,
    BashEnvRegistry,
    CollectionError,
    ContributorError,
    FunctionContributor,
    VariableSpec,
    plugin,
)
from dsh.core import Context, FiberState, FieldError, Plugin
from dsh.session import DSH_HOME, AgentRef, SessionHeader, ToolExecution

HEADER = SessionHeader(id="sess-1", cwd="/work/project")
AGENT_CALL = ToolExecution("bash", "c1", agent=AgentRef("main", HEADER), turn_id="sess-1:turn-1")
BARE_CALL = ToolExecution("bash", "c2")


def _contributor(
    name: str, variables: Mapping[str, object], values: Mapping[str, object] | None = None
) -> FunctionContributor:
    return FunctionContributor(name, variables, lambda execution: values or {})  # type: ignore[arg-type]


@pytest.fixture
def registry(tmp_path: Path) -> BashEnvRegistry:
    return BashEnvRegistry(tmp_path / "home")


@pytest.mark.parametrize(
    ("contributor", "message"),
    [
        (_contributor("  ", {"DSH_A": "a"}), "blank or missing name"),
        (_contributor("c", {}), "contributor 'c' declares no variables"),
        (_contributor("c", {"DSH_lower": "a"}), "contributor 'c' declares key 'DSH_lower', which is not DSH_"),
        (_contributor("c", {"OTHER_A": "a"}), "key 'OTHER_A'"),
        (_contributor("c", {"DSH_": "a"}), "key 'DSH_'"),
        (_contributor("c", {"DSH_1A": "a"}), "key 'DSH_1A'"),
        (_contributor("c", {"DSH_HOME": "a"}), "contributor 'c' declares key 'DSH_HOME', which is reserved"),
        (_contributor("c", {"DSH_SESSION_ID": "a"}), "reserved"),
        (_contributor("c", {"DSH_SHELL": "a"}), "reserved"),
        (
            _contributor("c", {"DSH_TOOL_CALL_ID": "a"}),
            "contributor 'c' declares key 'DSH_TOOL_CALL_ID', which is reserved",
        ),
        (_contributor("c", {"DSH_TURN_ID": "a"}), "reserved"),
        (
            _contributor("c", {"DSH_DEPLOYMENT": "a"}),
            "contributor 'c' declares key 'DSH_DEPLOYMENT', which only dsh itself sets",
        ),
        (_contributor("c", {"DSH_A": " "}), "contributor 'c' gives key 'DSH_A' a blank description"),
        (_contributor("c", {"DSH_A": VariableSpec("")}), "blank description"),
    ],
)
def test_malformed_contributors_are_rejected_at_registration(
    registry: BashEnvRegistry, contributor: FunctionContributor, message: str
) -> None:
    with pytest.raises(ContributorError, match=message):
        registry.register(contributor)
    assert registry.contributors() == []


def test_dsh_deployment_is_declared_by_dsh_itself_only(registry: BashEnvRegistry) -> None:
    # bash-env's own DeploymentFile registers it as a built-in.
    registry.register(_contributor("deployment", {"DSH_DEPLOYMENT": "d"}, {"DSH_DEPLOYMENT": "/f.yaml"}), builtin=True)
    assert registry.collect(BARE_CALL)["DSH_DEPLOYMENT"] == "/f.yaml"


def test_duplicate_name_and_duplicate_key_ownership(registry: BashEnvRegistry) -> None:
    registry.register(_contributor("region", {"DSH_REGION": "r"}))
    with pytest.raises(ContributorError, match="a contributor named 'region' is already registered"):
        registry.register(_contributor("region", {"DSH_OTHER": "o"}))
    with pytest.raises(
        ContributorError,
        match="key 'DSH_REGION' is already owned by contributor 'region'; contributor 'zone' cannot declare it",
    ) as err:
        registry.register(_contributor("zone", {"DSH_ZONE": "z", "DSH_REGION": "r"}))
    assert (err.value.contributor, err.value.key) == ("zone", "DSH_REGION")
    assert registry.contributors() == ["region"]
    assert [v.key for v in registry.list() if not v.builtin] == ["DSH_REGION"]


def test_collect_builds_a_fresh_immutable_snapshot(registry: BashEnvRegistry, tmp_path: Path) -> None:
    registry.register(_contributor("b-second", {"DSH_B": "b"}, {"DSH_B": "2"}))
    registry.register(FunctionContributor("a-first", {"DSH_A": "a"}, lambda e: {"DSH_A": e.call_id}))
    snap = registry.collect(AGENT_CALL)
    assert dict(snap) == {
        "DSH_HOME": str(tmp_path / "home"),
        "DSH_SHELL": "1",
        "DSH_SESSION_ID": "sess-1",
        "DSH_TOOL_CALL_ID": "c1",
        "DSH_TURN_ID": "sess-1:turn-1",
        "DSH_AGENT_ID": "sess-1",
        "DSH_AGENT_DEPTH": "0",
        "DSH_A": "c1",
        "DSH_B": "2",
    }
    with pytest.raises(TypeError):
        snap["DSH_A"] = "x"  # type: ignore[index]
    bare = registry.collect(BARE_CALL)
    assert dict(bare) == {"DSH_HOME": str(tmp_path / "home"), "DSH_SHELL": "1", "DSH_A": "c2", "DSH_B": "2"}
    no_turn = registry.collect(ToolExecution("bash", "c3", agent=AgentRef("main", HEADER)))
    assert no_turn["DSH_TOOL_CALL_ID"] == "c3" and "DSH_TURN_ID" not in no_turn
    assert snap is not registry.collect(AGENT_CALL)


def test_omitted_key_is_absent(registry: BashEnvRegistry) -> None:
    registry.register(_contributor("opt", {"DSH_OPT": "optional"}, {}))
    assert "DSH_OPT" not in registry.collect(AGENT_CALL)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"DSH_UNDECLARED": "x"}, "contributor 'bad' returned undeclared key 'DSH_UNDECLARED'"),
        ({"DSH_OK": 3}, "contributor 'bad' returned an int for key 'DSH_OK', not a string"),
        ({"DSH_OK": None}, "contributor 'bad' returned None for key 'DSH_OK', not a string"),
        ({"DSH_OK": ["x"]}, "contributor 'bad' returned a list for key 'DSH_OK', not a string"),
    ],
)
def test_bad_output_fails_collection_naming_contributor_and_key(
    registry: BashEnvRegistry, values: dict[str, object], message: str
) -> None:
    registry.register(_contributor("bad", {"DSH_OK": "ok"}, values))
    with pytest.raises(CollectionError, match=message) as err:
        registry.collect(AGENT_CALL)
    assert err.value.contributor == "bad"


def test_raising_contributor_fails_only_that_collection(registry: BashEnvRegistry) -> None:
    calls = []

    def flaky(execution: ToolExecution) -> Mapping[str, str]:
        calls.append(execution.call_id)
        if len(calls) == 1:
            raise RuntimeError("backend down")
        return {"DSH_FLAKY": "ok"}

    registry.register(FunctionContributor("flaky", {"DSH_FLAKY": "f"}, flaky))
    with pytest.raises(CollectionError, match="contributor 'flaky' raised RuntimeError while resolving: backend down"):
        registry.collect(AGENT_CALL)
    assert registry.collect(AGENT_CALL)["DSH_FLAKY"] == "ok"


def test_explicit_disposer_removes_keys(registry: BashEnvRegistry) -> None:
    dispose = registry.register(_contributor("tmp", {"DSH_TMP": "t"}, {"DSH_TMP": "1"}))
    dispose()
    dispose()
    assert "DSH_TMP" not in registry.collect(AGENT_CALL)
    assert "DSH_TMP" not in [v.key for v in registry.list()]
    registry.register(_contributor("tmp", {"DSH_TMP": "t"}))  # name and key are free again


def _harness(tmp_path: Path) -> Context:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path / "home")
    root.plugin(plugin, {"entry_points": False})
    return root


def test_the_deployment_file_is_a_built_in_fact_held_before_any_other_contributor(tmp_path: Path) -> None:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path / "home")
    root.plugin(plugin, {"entry_points": False, "deployment": "/etc/dsh/deployment.yaml"})
    registry = root.require(BASH_ENV)
    assert registry.collect(BARE_CALL)["DSH_DEPLOYMENT"] == "/etc/dsh/deployment.yaml"
    (row,) = [v for v in registry.list() if v.key == "DSH_DEPLOYMENT"]
    assert (row.owner, row.builtin) == ("deployment", True)
    # A plugin's contributor of the same name loses; without the config there is no such fact.
    late = root.plugin(
        Plugin(
            name="late",
            apply=lambda ctx, cfg: ctx.require(BASH_ENV).register(_contributor("deployment", {"DSH_D": "d"})),
            inject=(BASH_ENV,),
        )
    )
    assert late.state is FiberState.FAILED and "a contributor named 'deployment' is already registered" in (
        late.error or ""
    )
    assert "DSH_DEPLOYMENT" not in _harness(tmp_path).require(BASH_ENV).collect(BARE_CALL)


def test_disposing_the_registering_plugin_removes_its_keys(tmp_path: Path) -> None:
    root = _harness(tmp_path)

    def apply(ctx: Context, config: None) -> None:
        ctx.require(BASH_ENV).register(_contributor("mine", {"DSH_MINE": "m"}, {"DSH_MINE": "1"}))

    fiber = root.plugin(Plugin(name="third-party", apply=apply, inject=(BASH_ENV,)))
    registry = root.require(BASH_ENV)
    assert registry.collect(AGENT_CALL)["DSH_MINE"] == "1"
    fiber.dispose()
    assert "DSH_MINE" not in registry.collect(AGENT_CALL)
    assert "DSH_MINE" not in [v.key for v in registry.list()]


def test_malformed_contributor_fails_its_plugin_and_others_run(tmp_path: Path) -> None:
    root = _harness(tmp_path)
    bad = root.plugin(
        Plugin(
            name="bad",
            apply=lambda ctx, cfg: ctx.require(BASH_ENV).register(_contributor("x", {"DSH_HOME": "h"})),
            inject=(BASH_ENV,),
        )
    )
    good = root.plugin(
        Plugin(
            name="good",
            apply=lambda ctx, cfg: ctx.require(BASH_ENV).register(_contributor("y", {"DSH_Y": "y"})),
            inject=(BASH_ENV,),
        )
    )
    assert bad.state is FiberState.FAILED and "reserved" in (bad.error or "")
    assert good.state is FiberState.ACTIVE


def test_list_includes_builtins_marked_and_sorted(tmp_path: Path) -> None:
    registry = _harness(tmp_path).require(BASH_ENV)
    rows = registry.list()
    assert [r.key for r in rows] == [
        "BAGGAGE",
        "DSH_AGENT_DEPTH",
        "DSH_AGENT_ID",
        "DSH_HOME",
        "DSH_PARENT_SESSION_ID",
        "DSH_SESSION_ID",
        "DSH_SESSION_JSONL",
        "DSH_SHELL",
        "DSH_TOOL_CALL_ID",
        "DSH_TURN_ID",
        "TRACEPARENT",
        "TRACESTATE",
    ]
    assert all(r.builtin and r.distribution == "dsh-bash-env" for r in rows)
    assert {r.owner for r in rows} == {"bash-env", "session-persistence"}


class _ClassContributor:
    name = "cls"
    variables: Mapping[str, str] = {"DSH_CLS": "c"}

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        return {"DSH_CLS": "instance"}


def test_entry_point_objects_become_contributors(registry: BashEnvRegistry) -> None:
    from dsh.bash_env._declare import as_contributor

    made = as_contributor(_ClassContributor)
    assert isinstance(made, _ClassContributor)
    instance = _ClassContributor()
    assert as_contributor(instance) is instance
    assert as_contributor(lambda: instance) is instance
    registry.register(made)
    assert registry.collect(BARE_CALL)["DSH_CLS"] == "instance"
    with pytest.raises(ContributorError, match="not a contributor"):
        as_contributor(lambda: 42)
    with pytest.raises(ContributorError, match="neither a contributor nor a callable"):
        as_contributor(42)


@pytest.mark.parametrize("seconds", [float("inf"), 1e12, threading.TIMEOUT_MAX * 2])
def test_a_resolve_timeout_no_wait_can_take_is_refused_naming_the_field_and_the_limit(seconds: float) -> None:
    message = (
        f"field 'resolve_timeout' must be a finite number of seconds up to {threading.TIMEOUT_MAX:.0f}, not {seconds!r}"
    )
    with pytest.raises(FieldError) as caught:
        BashEnvRegistry("/h", resolve_timeout=seconds)
    assert str(caught.value) == message and caught.value.field == "resolve_timeout"
    with pytest.raises(FieldError) as caught:
        BashEnvConfig(resolve_timeout=seconds)
    assert str(caught.value) == message
    for bad in (0, -1, float("nan")):
        with pytest.raises(FieldError) as caught:
            BashEnvRegistry("/h", resolve_timeout=bad)
        assert str(caught.value) == "field 'resolve_timeout' must be greater than 0"


def test_the_longest_resolve_timeout_still_waits() -> None:
    # The limit itself works for a blocking and an awaited collect (the wait a lock accepts).
    longest = BashEnvRegistry("/h", resolve_timeout=threading.TIMEOUT_MAX)
    longest.register(_contributor("x", {"DSH_X": "x"}, {"DSH_X": "1"}))
    assert longest.collect(BARE_CALL)["DSH_X"] == "1"
    assert asyncio.run(longest.collect_async(BARE_CALL))["DSH_X"] == "1"


def test_reach_reports_a_contributor_s_last_failure_until_it_succeeds(registry: BashEnvRegistry) -> None:
    """``dsh env``'s "here:" line: a contributor that failed its last call is not passed, and says why."""
    down = [True]

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        if down[0]:
            raise RuntimeError("backend down")
        return {"DSH_FLAKY": "up"}

    registry.register(FunctionContributor("flaky", {"DSH_FLAKY": "a fact from a backend"}, resolve))
    assert registry.reach()["DSH_FLAKY"].passes is True  # no call yet: what it would do
    with pytest.raises(CollectionError):
        registry.collect(AGENT_CALL)
    reach = registry.reach()["DSH_FLAKY"]
    assert reach == (
        False,
        "its last call failed: contributor 'flaky' raised RuntimeError while resolving: backend down",
    )
    down[0] = False
    assert registry.collect(AGENT_CALL)["DSH_FLAKY"] == "up"
    assert registry.reach()["DSH_FLAKY"].passes is True
