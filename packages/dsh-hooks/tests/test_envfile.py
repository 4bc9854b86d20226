"""SessionStart env files: read once, never through a link, never waited on (issue 21, item 14)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from dsh.hooks._envfile import EnvFiles
from dsh.hooks._process import hook_executor


def _load(
    home: Path, write: list[str | None], swap: str | None = None, ambient: dict[str, str] | None = None
) -> tuple[dict[str, str], list[str], list[Path]]:
    """Env files of one session: each text written to its own file (None: the hook wrote none)."""
    files = EnvFiles(home)
    try:
        paths = [files.new_file("s1", f"claude-{i}") for i in range(len(write))]
        for path, text in zip(paths, write, strict=True):
            if text is not None:
                path.write_text(text)
                path.chmod(0o600)
        if swap == "fifo":
            paths[0].unlink(missing_ok=True)
            os.mkfifo(paths[0], 0o600)
        elif swap == "symlink":
            target = home / "elsewhere.sh"
            target.write_text("export PLANTED=1\n")
            paths[0].unlink(missing_ok=True)
            paths[0].symlink_to(target)
        warnings = asyncio.run(files.load(hook_executor(spill_dir=home / "output"), "s1", str(home), paths, ambient))
        return dict(files.exports("s1")), warnings, paths
    finally:
        files.close()


def test_exports_of_each_file_in_order(tmp_path: Path) -> None:
    env, warnings, _ = _load(tmp_path, ["export A=1 B='two words'\n", None, "if then\n", "export A=3\n"])
    assert env == {"A": "3", "B": "two words"} and warnings == []


def test_a_fifo_in_place_of_the_file_is_refused_at_once_with_its_path(tmp_path: Path) -> None:
    started = time.monotonic()
    env, warnings, paths = _load(tmp_path, ["", "export LATER=1\n"], swap="fifo")
    assert time.monotonic() - started < 10  # it used to wait 30 s for a writer
    assert env == {"LATER": "1"}
    assert len(warnings) == 1 and str(paths[0]) in warnings[0] and "FIFO" in warnings[0]
    assert "\n" not in warnings[0]


def test_a_symbolic_link_in_place_of_the_file_is_not_followed(tmp_path: Path) -> None:
    env, warnings, paths = _load(tmp_path, ["", "export LATER=1\n"], swap="symlink")
    assert env == {"LATER": "1"}
    assert len(warnings) == 1 and str(paths[0]) in warnings[0] and "symbolic link" in warnings[0]


def test_an_env_file_cannot_export_shell_code_variables(tmp_path: Path) -> None:
    env, _, _ = _load(tmp_path, ["export ENV=/tmp/x.sh BASH_ENV=/tmp/y.sh PS4='$(id)' KEPT=1\n"])
    assert env == {"KEPT": "1"}


def test_an_env_file_extends_the_session_s_environment_not_the_server_s(tmp_path: Path) -> None:
    # Served, the session's environment is the client's: `export PATH="$PATH:/extra"` once extended
    # the dsh serve process's PATH, so the client's commands lost their own.
    client = {"PATH": f"{tmp_path}/client-bin:/usr/bin:/bin", "FROM_CLIENT": "1"}
    env, _, _ = _load(tmp_path, ['export PATH="$PATH:/extra" SEEN="$FROM_CLIENT"\n'], ambient=client)
    assert env == {"PATH": f"{tmp_path}/client-bin:/usr/bin:/bin:/extra", "SEEN": "1"}
