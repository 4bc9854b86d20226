"""What a hook's process starts from: the session's environment, with no peer harness's identity in it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.bash import harness_identity_keys
from dsh.hooks import _claude, _codex
from dsh.hooks._dialect import dialects
from dsh.hooks._process import hook_executor, run_hook
from dsh.hooks._table import HookCommand
from dsh.hooks.dialect import loaded
from dsh.session import SessionHeader


@pytest.fixture(autouse=True)
def builtin_dialects() -> Iterator[None]:
    """Claude Code and Codex loaded, as the hooks plugin loads them from their entry points."""
    with loaded(_claude.DIALECT, _codex.DIALECT):
        yield


OUTER = {
    "CLAUDE_ENV_FILE": "/outer/env",
    "CLAUDE_PROJECT_DIR": "/outer/project",
    "CLAUDE_CODE_SESSION_ID": "outer-session",
    "CLAUDE_PLUGIN_ROOT": "/outer/plugin",
    "CLAUDE_PLUGIN_DATA": "/outer/data",
    "CODEX_THREAD_ID": "outer-thread",
    "CODEX_ENV_FILE": "/outer/codex-env",
}


def test_every_name_a_dialect_sets_for_its_hooks_is_one_no_child_inherits() -> None:
    # What a hook gets from its dialect must never come from outside instead: the executor drops
    # these names from every ambient environment, so a dialect that set a new one would leak the
    # outer harness's value to hooks whenever this dialect had none to give.
    hook = HookCommand(command="true", plugin_root="/p", plugin_data="/d")
    header = SessionHeader(id="s", cwd="/w")
    for dialect in dialects():
        names = {*dialect.hook_env(hook, header), *dialect.env_file_names, *dialect.placeholders}
        assert names <= dialect.identity_variables, (dialect.name, names - dialect.identity_variables)
        assert dialect.identity_variables <= harness_identity_keys()  # declared while it is loaded
    assert set(OUTER) == harness_identity_keys()


def test_a_hook_starts_from_the_given_environment_without_any_peers_identity(tmp_path: Path) -> None:
    ambient = {**OUTER, "PATH": "/usr/bin:/bin", "CLIENT_ONLY": "1"}
    hook = HookCommand(command="env", timeout=30)
    own = {"CLAUDE_PROJECT_DIR": str(tmp_path), "CLAUDE_CODE_SESSION_ID": "s"}
    report = asyncio.run(
        run_hook(
            hook_executor(spill_dir=tmp_path / "out"),
            "claude",
            "PreToolUse",
            hook,
            json.dumps({}),
            str(tmp_path),
            own,
            "Bash",
            ambient=ambient,
        )
    )
    seen = dict(line.split("=", 1) for line in report.stdout.splitlines() if "=" in line)
    assert seen["CLIENT_ONLY"] == "1" and seen["CLAUDE_PROJECT_DIR"] == str(tmp_path)
    assert seen["CLAUDE_CODE_SESSION_ID"] == "s"
    assert not {k for k in OUTER if k in seen} - set(own), "no outer harness's identity reaches the hook"
