"""The command's errors carry their subject as attributes, and its errors module draws the whole tree."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
from pathlib import Path

import pytest

import dsh.cli
from dsh.agent import ScriptedModel, ScriptError
from dsh.agent.script import load_script
from dsh.cli import MissingPluginError, ServeError, UsageError, _errors
from dsh.cli._exec import exec_command
from dsh.cli._serve import _claim
from dsh.cli._sessions_cmd import run_verify
from dsh.cli._skills_cmd import skills
from dsh.cli_fast._wire import WireError
from dsh.core import DshError
from dsh.harness import open_runtime


def test_the_errors_docstring_draws_every_error_class() -> None:
    classes = [
        getattr(_errors, name)
        for name in _errors.__all__
        if isinstance(getattr(_errors, name), type) and issubclass(getattr(_errors, name), BaseException)
    ]
    assert {c.__name__ for c in classes} >= {"WireError", "UsageError", "ServeError", "MissingPluginError"}
    for cls in classes:
        assert f"{cls.__name__} " in (_errors.__doc__ or ""), cls
    assert dsh.cli.UsageError is _errors.UsageError
    assert not issubclass(WireError, DshError)  # the served client stays free of the kernel


def test_a_script_error_names_its_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    with pytest.raises(ScriptError, match="cannot read script") as caught:
        load_script(missing)
    assert caught.value.path == str(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ScriptError, match="invalid script syntax") as caught:
        load_script(bad)
    assert caught.value.path == str(bad)
    with pytest.raises(ScriptError, match="no subagent 'ghost'") as caught:
        ScriptedModel([]).subagent("ghost")
    assert caught.value.subagent == "ghost"


def test_a_live_server_s_socket_is_named(tmp_path: Path) -> None:
    path = tmp_path / "run" / "s.sock"
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(path))
        live.listen()
        with pytest.raises(ServeError, match="already listens") as caught:
            _claim(path)
    assert caught.value.path == str(path)


def test_usage_errors_name_their_option(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs a session") as caught:
        run_verify({}, session=None, path=None, call=False, deployment=None)
    assert caught.value.option == "--session"
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home")}
    env.pop("DSH_DEPLOYMENT", None)
    with open_runtime(env=env) as runtime:
        for kwargs, option, value in [
            ({"timeout": -1.0}, "--timeout", -1.0),
            ({"cwd": str(tmp_path / "nowhere")}, "--cwd", str(tmp_path / "nowhere")),
        ]:
            with pytest.raises(UsageError) as caught:
                asyncio.run(exec_command(runtime, "true", **kwargs))  # type: ignore[arg-type]
            assert (caught.value.option, caught.value.value) == (option, value)
        with pytest.raises(UsageError, match="needs a command") as caught:
            asyncio.run(exec_command(runtime, "  "))
        assert caught.value.option == "--"


def test_a_verb_needing_a_plugin_names_it_and_the_deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = tmp_path / "d.yaml"
    deployment.write_text("plugins:\n  - {id: skills, enabled: false}\n")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    with pytest.raises(MissingPluginError, match="loads no skills plugin") as caught:
        skills(argparse.Namespace(deployment=str(deployment), json=False))
    assert (caught.value.deployment, caught.value.plugin) == (str(deployment), "skills")
