"""Which deployment is in effect: the one rule of the ``dsh`` command, ``dsh serve`` and ``Harness``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh.paths import resolve_dsh_home
from dsh.paths.deployment import choose_deployment, relative_home


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


def test_a_relative_home_is_refused_naming_the_fix() -> None:
    assert relative_home({"DSH_HOME": "/abs"}) is None
    assert relative_home({"DSH_HOME": "~/h"}) is None
    assert relative_home({}) is None
    refused = relative_home({"DSH_HOME": "rel"})
    assert refused is not None and "'rel'" in refused and 'DSH_HOME="$PWD/rel"' in refused


def test_a_tilde_in_dsh_deployment_is_the_home_of_the_environment_asked_about(tmp_path: Path) -> None:
    # `dsh serve` applies the rule to a client's environment: the client's HOME, not the server's.
    env = {"DSH_HOME": str(tmp_path / "h"), "HOME": str(tmp_path / "client"), "DSH_DEPLOYMENT": "~/d.yaml"}
    assert choose_deployment(None, env, cwd="/").path == str(tmp_path / "client" / "d.yaml")
    assert choose_deployment(None, {**env, "DSH_DEPLOYMENT": "~"}, cwd="/").path == str(tmp_path / "client")


def test_a_tilde_in_an_environment_without_home_is_the_user_s_home_not_the_asking_process_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client without HOME (env -u HOME, a cron job) reads ~ as its user's passwd entry, as the shell's
    # own expansion does; its server (same uid, another HOME) must read the client's ~ the same way, not
    # as its own $HOME: else the two disagree and the server sends the line back to run in process.
    import pwd

    monkeypatch.setenv("HOME", str(tmp_path / "server"))
    user = pwd.getpwuid(os.getuid()).pw_dir
    env = {"DSH_HOME": str(tmp_path / "h"), "DSH_DEPLOYMENT": "~/d.yaml"}
    assert choose_deployment(None, env, cwd="/").path == os.path.join(user, "d.yaml")
    assert resolve_dsh_home(None, {"DSH_HOME": "~/dsh"}) == Path(user) / "dsh"
