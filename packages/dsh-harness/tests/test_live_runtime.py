"""A long-lived process's runtime follows the files it was booted from (``dsh serve``, ``Harness.changed``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dsh.core import FiberState
from dsh.harness import Harness, LiveRuntime, open_runtime
from dsh.hooks import HOOKS, hook_runner
from dsh.loader import BootError, Runtime
from dsh.paths.deployment import choose_deployment
from dsh.testing import OTHER_UID, needs_root


def _home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    return home, {"DSH_HOME": str(home)}


def _hooks_file(home: Path, mode: int = 0o600) -> Path:
    (home / "hooks").mkdir(mode=0o700, exist_ok=True)
    path = home / "hooks" / "claude.json"
    path.write_text(json.dumps({"hooks": {}}))
    path.chmod(mode)
    return path


def _claude_source(runtime: Runtime) -> str:
    """Where the runtime's Claude Code hooks were read from ("": no file was there)."""
    runner = hook_runner(runtime.ctx)
    assert runner is not None
    return runner.tables["claude"].source


def test_nothing_moved_is_one_runtime_and_a_new_hooks_file_boots_again(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    with LiveRuntime(choose_deployment(None, env), env) as live:
        with live.use() as first, live.use() as same:
            assert first is same and _claude_source(first) == ""
        assert not live.changed()
        path = _hooks_file(home)
        assert live.changed()
        with live.use() as second:
            assert second is not first and _claude_source(second) == f"claude hooks file {path}"
        assert first.ctx.fiber.state is FiberState.DISPOSED, "the runtime the files no longer describe is closed"
    assert second.ctx.fiber.state is FiberState.DISPOSED


def test_a_runtime_in_use_is_closed_by_its_last_user(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    live = LiveRuntime(choose_deployment(None, env), env)
    with live.use() as old:
        _hooks_file(home)
        with live.use() as new:
            assert new is not old
        assert old.ctx.fiber.state is FiberState.ACTIVE, "a request still runs on it"
    assert old.ctx.fiber.state is FiberState.DISPOSED
    live.close()
    assert new.ctx.fiber.state is FiberState.DISPOSED


def test_files_that_do_not_boot_refuse_every_request_until_they_do(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    hooks = _hooks_file(home)
    with LiveRuntime(choose_deployment(None, env), env) as live:
        hooks.chmod(0o666)  # anyone may write the hooks now
        for _ in range(2):
            with pytest.raises(BootError, match=r"refusing claude hooks file .*\(mode 0666\)"), live.use():
                pass
            assert live.runtime is None
        hooks.chmod(0o600)
        with live.use() as runtime:
            assert runtime.ctx.get(HOOKS) is not None


def test_a_deployment_files_edit_and_its_folders_trust_count_a_file_beside_it_does_not(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    folder = tmp_path / "conf"
    folder.mkdir(mode=0o700)
    deployment = folder / "d.yaml"
    deployment.write_text("persistence: {backend: jsonl}\n")
    deployment.chmod(0o600)
    with LiveRuntime(choose_deployment(str(deployment), env), env) as live:
        (folder / "notes.txt").write_text("unrelated")
        assert not live.changed()
        deployment.write_text("persistence: {backend: jsonl}  \n")
        assert live.changed()
        with live.use():
            pass
        folder.chmod(0o777)
        assert live.changed()
        folder.chmod(0o700)


def test_a_harness_says_when_its_files_moved(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    with Harness(env=env) as harness:
        assert not harness.changed()
        _hooks_file(home)
        assert harness.changed()
    with Harness({"persistence": {"backend": "jsonl"}}, env=env) as harness:
        assert not harness.changed()
        (home / "hooks" / "claude.json").chmod(0o644)
        assert harness.changed(), "an in-memory deployment still loads the home's hook files"


def test_trust_anywhere_on_the_walk_counts_and_a_deployment_file_appearing_too(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    shared = tmp_path / "cfg"
    (shared / "sub").mkdir(parents=True, mode=0o700)
    shared.chmod(0o700)
    hooks = shared / "sub" / "claude.json"
    hooks.write_text(json.dumps({"hooks": {}}))
    hooks.chmod(0o600)
    with Harness({"plugins": [{"id": "hooks", "config": {"claude": str(hooks)}}]}, env=env) as harness:
        assert not harness.changed()
        shared.chmod(0o777)  # a folder above the hook file: a cold start refuses the file now
        assert harness.changed()
        shared.chmod(0o700)
    with Harness(env=env) as harness:  # the built-in deployment, until <home>/deployment.yaml exists
        (home / "deployment.yaml").write_text("{}\n")
        assert harness.changed()


def test_a_plugin_folder_and_its_data_folder_are_watched_for_trust(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True, mode=0o700)
    plugin.chmod(0o700)
    (plugin / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {}}))
    (plugin / "hooks" / "hooks.json").chmod(0o600)
    deployment = {"plugins": [{"id": "hooks", "config": {"claude_plugins": [str(plugin)]}}]}
    for folder in (plugin, home / "plugins" / "data" / "plugin", plugin / "skills"):
        with Harness(deployment, env=env) as harness:
            assert not harness.changed()
            if folder.exists():
                folder.chmod(0o777)
            else:
                folder.mkdir(mode=0o700)  # skills appearing: a cold start loads them
            assert harness.changed(), folder
            folder.chmod(0o700)


def test_a_hook_file_edited_while_the_server_boots_again_is_seen_at_the_next_request(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    hooks = _hooks_file(home)
    calls = 0

    def opener(**kwargs: object) -> object:
        nonlocal calls
        calls += 1
        runtime = open_runtime(**kwargs)  # type: ignore[arg-type]
        if calls == 2:  # the hooks plugin has read the file: an edit lands before the boot ends
            hooks.write_text(json.dumps({"hooks": {"PreToolUse": []}}))
        return runtime

    with LiveRuntime(choose_deployment(None, env), env, opener=opener) as live:  # type: ignore[arg-type]
        hooks.write_text(json.dumps({"hooks": {"Stop": []}}))
        with live.use():
            pass
        assert calls == 2 and live.changed(), "the edit made during the boot is not taken as loaded"
        with live.use():
            pass
        assert calls == 3 and not live.changed()


@needs_root
def test_a_link_on_the_way_given_to_another_user_is_seen(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    real = tmp_path / "real.json"
    real.write_text(json.dumps({"hooks": {}}))
    real.chmod(0o600)
    (home / "hooks").mkdir(mode=0o700)
    link = home / "hooks" / "claude.json"
    link.symlink_to(real)
    with Harness(env=env) as harness:
        assert not harness.changed()
        os.lchown(link, OTHER_UID, OTHER_UID)  # the link itself, its target untouched
        assert harness.changed()
