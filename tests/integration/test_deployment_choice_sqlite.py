"""Which deployment a command uses, shown with a SQLite deployment (dsh-agent with dsh-persistence-sqlite)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import dsh


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
