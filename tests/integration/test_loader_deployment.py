from __future__ import annotations

from pathlib import Path

import pytest

from dsh.core import FiberState
from dsh.loader import (
    BootError,
    Deployment,
    PluginEntry,
    boot,
    compose,
    load_deployment,
    parse_deployment,
)
from dsh.session import DSH_HOME


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    return path


def test_yaml_deployment_boots_with_defaults(tmp_path: Path) -> None:
    path = _write(tmp_path, f"dsh_home: {tmp_path / 'h'}\nplugins:\n  - {{id: env, name: bash-env}}\n")
    runtime = boot(load_deployment(path), source=str(path))
    try:
        assert runtime.home == tmp_path / "h"
        assert runtime.ctx.get(DSH_HOME) == tmp_path / "h"
        assert runtime.entries["env"].state is FiberState.ACTIVE
        assert runtime.entries["persistence"].origin is not None
        assert runtime.entries["persistence"].origin.name == "jsonl"
    finally:
        runtime.close()


def test_unknown_plugin_lists_available(tmp_path: Path) -> None:
    deployment = Deployment(dsh_home=str(tmp_path), plugins=[PluginEntry(id="x", name="no-such-plugin")])
    with pytest.raises(BootError) as err:
        boot(deployment, source="d.yaml")
    message = str(err.value)
    assert message.startswith("d.yaml: deployment did not boot")
    assert "entry 'x'" in message and "no entry point 'no-such-plugin'" in message and "bash-env" in message


def test_unknown_backend_lists_installed(tmp_path: Path) -> None:
    deployment = parse_deployment({"dsh_home": str(tmp_path), "persistence": {"backend": "oracle"}})
    with pytest.raises(
        BootError, match=r"no entry point 'oracle' in group 'dsh.persistence'; available: jsonl, postgres, sqlite"
    ):
        boot(deployment)


def test_invalid_plugin_config_fails_boot_naming_entry_and_field(tmp_path: Path) -> None:
    deployment = parse_deployment(
        {
            "dsh_home": str(tmp_path),
            "plugins": [{"id": "shell", "name": "tool-bash", "config": {"default_timeout": -1}}],
        }
    )
    with pytest.raises(BootError) as err:
        boot(deployment, source="d.yaml")
    assert "entry 'shell'" in str(err.value) and "field 'config.default_timeout'" in str(err.value)


def test_pending_entry_names_the_services_it_waits_for(tmp_path: Path) -> None:
    # tool-bash injects bash_env and tools; neither is loaded here.
    runtime = compose(parse_deployment({"dsh_home": str(tmp_path), "plugins": [{"id": "t", "name": "tool-bash"}]}))
    try:
        (problem,) = runtime.problems()
        assert problem == "entry 't' (plugin 'tool-bash') is pending, waiting for service(s): bash_env, tools"
    finally:
        runtime.close()


MISSPELT_INJECT = """
from dsh.core import Plugin

plugin = Plugin(name="wants-env", apply=lambda ctx, config: None, inject=("bash-env", "no-such-service"))
"""


def test_a_pending_entry_says_which_provided_service_it_likely_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plugin is called bash-env; the service it provides is bash_env.
    (tmp_path / "misspelt_inject.py").write_text(MISSPELT_INJECT)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = [{"id": "bash-env", "name": "bash-env"}, {"id": "w", "name": "misspelt_inject:plugin"}]
    runtime = compose(parse_deployment({"dsh_home": str(tmp_path / "h"), "plugins": plugins}))
    try:
        (problem,) = runtime.problems()
        assert problem == (
            "entry 'w' (plugin 'wants-env') is pending, waiting for service(s): "
            "bash-env (did you mean 'bash_env'?), no-such-service"
        )
    finally:
        runtime.close()


def test_module_attr_reference_and_its_failure(tmp_path: Path) -> None:
    ok = compose(parse_deployment({"dsh_home": str(tmp_path), "plugins": [{"id": "e", "name": "dsh.bash_env:plugin"}]}))
    assert ok.entries["e"].state is FiberState.ACTIVE
    ok.close()
    bad = compose(parse_deployment({"dsh_home": str(tmp_path), "plugins": [{"id": "e", "name": "nowhere.mod:plugin"}]}))
    assert bad.problems() == [
        "entry 'e': cannot import plugin 'nowhere.mod:plugin': ModuleNotFoundError: No module named 'nowhere'"
    ]
    bad.close()


def test_home_is_resolved_once_and_conflicts_fail(tmp_path: Path) -> None:
    same = parse_deployment(
        {
            "dsh_home": str(tmp_path / "h"),
            "plugins": [{"id": "env", "name": "bash-env", "config": {"dsh_home": str(tmp_path / "h/.")}}],
        }
    )
    runtime = boot(same)
    runtime.close()
    clash = parse_deployment(
        {
            "dsh_home": str(tmp_path / "a"),
            "plugins": [{"id": "env", "name": "bash-env", "config": {"dsh_home": str(tmp_path / "b")}}],
        }
    )
    # The plugin reads the deployment's home and fails naming both values; the boot reports it.
    with pytest.raises(
        BootError, match=r"plugin 'env': config.dsh_home resolves to .*/b but the deployment's home is .*/a"
    ):
        boot(clash, source="d.yaml")


def test_home_falls_back_to_environment(tmp_path: Path) -> None:
    runtime = boot(Deployment(), env={"DSH_HOME": str(tmp_path / "env-home")})
    try:
        assert runtime.home == tmp_path / "env-home"
    finally:
        runtime.close()
