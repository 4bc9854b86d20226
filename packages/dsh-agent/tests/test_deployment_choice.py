"""Which deployment a command uses, and how a deployment file layers on the default one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh.agent._args import choose_deployment
from dsh.agent._runtime import layer_on_defaults
from dsh.loader import DeploymentError, parse_deployment
from dsh.testing import dsh


def _ids(source: str, home: Path, **raw: object) -> list[str]:
    deployment = layer_on_defaults(parse_deployment(raw, source), source, {"DSH_HOME": str(home)})
    return [entry.id for entry in deployment.plugins]


def test_a_file_states_only_what_it_changes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert _ids("d.yaml", home) == ["bash-local", "bash-env", "tool-bash", "skills"]
    assert _ids("d.yaml", home, persistence={"backend": "sqlite"}) == ["bash-local", "bash-env", "tool-bash", "skills"]
    # An entry with a default's id replaces it in place; a new id is added after the defaults.
    layered = layer_on_defaults(
        parse_deployment({"plugins": [{"id": "extra", "name": "tool-pwsh"}, {"id": "tool-bash", "config": {"x": 1}}]}),
        "d.yaml",
        {"DSH_HOME": str(home)},
    )
    assert [(e.id, e.name, e.config) for e in layered.plugins] == [
        ("bash-local", "bash-local", {}),
        ("bash-env", "bash-env", {}),
        ("tool-bash", "tool-bash", {"x": 1}),
        ("skills", "skills", {}),
        ("extra", "tool-pwsh", {}),
    ]
    assert _ids("d.yaml", home, plugins=[{"id": "tool-bash", "enabled": False}]) == [
        "bash-local",
        "bash-env",
        "skills",
    ]
    assert _ids("d.yaml", home, plugins=[]) == ["bash-local", "bash-env", "tool-bash", "skills"]


def test_disabling_what_is_not_a_default_names_the_defaults(tmp_path: Path) -> None:
    with pytest.raises(DeploymentError, match=r"d.yaml: entry 'hook' has enabled: false but is not a default plugin"):
        _ids("d.yaml", tmp_path, plugins=[{"id": "hook", "enabled": False}])


def test_the_rule_flag_then_env_then_home_then_builtin(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"DSH_HOME": str(home)}
    builtin = choose_deployment(None, env)
    assert builtin.path is None and str(home / "deployment.yaml") in builtin.reason
    home.mkdir()
    (home / "deployment.yaml").write_text("{}\n")
    assert choose_deployment(None, env).path == str(home / "deployment.yaml")
    named = tmp_path / "named.yaml"
    assert choose_deployment(None, {**env, "DSH_DEPLOYMENT": str(named)}).path == str(named)
    assert choose_deployment(None, {**env, "DSH_DEPLOYMENT": "  "}).path == str(home / "deployment.yaml")
    flag = choose_deployment("x.yaml", {**env, "DSH_DEPLOYMENT": str(named)})
    assert flag.path == str(Path("x.yaml").absolute()) and "--deployment" in flag.reason


def test_a_deployment_in_the_home_sticks_for_every_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "deployment.yaml").write_text("persistence: {backend: sqlite}\n")
    ran = dsh("exec", "--json", "--", "echo ${DSH_SESSION_JSONL-none}", home=home)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["stdout"] == "none\n" and out["location"] is None
    assert (home / "sessions.sqlite3").is_file()
    listed = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    assert [s["id"] for s in listed] == [out["session_id"]]
    plugins = json.loads(dsh("plugins", "--json", home=home).stdout)
    assert plugins["deployment"] == {"path": str(home / "deployment.yaml"), "reason": "found in DSH_HOME"}
    text = dsh("plugins", home=home).stdout.splitlines()[0]
    assert text == f"deployment: {home / 'deployment.yaml'} (found in DSH_HOME)"


def test_dsh_deployment_names_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    file = tmp_path / "sqlite.yaml"
    file.write_text("persistence: {backend: sqlite}\n")
    env = {"DSH_DEPLOYMENT": str(file)}
    ran = json.loads(dsh("exec", "--json", "--", "true", home=home, env=env).stdout)
    assert ran["location"] is None
    assert [s["id"] for s in json.loads(dsh("sessions", "list", "--json", home=home, env=env).stdout)["sessions"]] == [
        ran["session_id"]
    ]
    reason = json.loads(dsh("plugins", "--json", home=home, env=env).stdout)["deployment"]["reason"]
    assert reason == "named by $DSH_DEPLOYMENT"
    # Without it, the built-in JSONL deployment sees none of the SQLite sessions, and says why.
    builtin = json.loads(dsh("plugins", "--json", home=home).stdout)["deployment"]
    assert builtin["path"] is None and builtin["reason"].startswith("built-in default")


def test_a_managed_shell_names_the_deployment_so_nested_dsh_uses_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    file = tmp_path / "sqlite.yaml"
    file.write_text("persistence: {backend: sqlite}\n")
    nested = dsh("exec", "--deployment", str(file), "--", "echo $DSH_DEPLOYMENT; dsh plugins --json", home=home)
    assert nested.returncode == 0, nested.stderr
    first, rest = nested.stdout.split("\n", 1)
    assert first == str(file)
    assert json.loads(rest)["deployment"] == {"path": str(file), "reason": "named by $DSH_DEPLOYMENT"}
    builtin = dsh("exec", "--", "echo ${DSH_DEPLOYMENT-unset}", home=home)
    assert builtin.stdout == "unset\n"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("turns: 3\n", "field 'turns' must be a list"),
        ("- user: hi\n", "the top level must be a mapping of fields"),
        (
            "turns:\n - user: hi\n   steps: [{tool_calls: [{name: bash, argumnts: {}}]}]\n",
            "field 'turns[0].steps[0].tool_calls[0].argumnts' is not a known field (check its spelling)",
        ),
    ],
)
def test_script_errors_name_file_and_field_in_plain_words(tmp_path: Path, script: str, message: str) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(script)
    proc = dsh("run", "--script", str(path), home=tmp_path / "home")
    assert proc.returncode == 1
    assert proc.stderr == f"dsh: {path}: {message}\n"
    assert "Input should" not in proc.stderr
