"""The home as OpenSSH treats `~/.ssh`: private when dsh makes it, refused when others can write it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.testing import OTHER_UID, as_other_uid, needs_root
from tests.helpers import dsh
from tests.integration.serve_support import DSH_FAILED, ServeProcess, clean_env

pytestmark = pytest.mark.integration


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_umask_000_still_makes_everything_private(tmp_path: Path) -> None:
    home = tmp_path / "deep" / "home"
    proc = subprocess.run(
        [sys.executable, "-m", "dsh.cli", "exec", "--json", "--", "seq 1 20000; seq 1 20000 >&2"],
        env=clean_env(home),
        capture_output=True,
        text=True,
        umask=0,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    transcript = Path(out["location"]["path"])
    for directory in (tmp_path / "deep", home, home / "sessions", transcript.parent, home / "output"):
        assert _mode(directory) == 0o700, directory
    assert _mode(transcript) == 0o600
    spilled = sorted((home / "output").iterdir())
    assert sorted(p.suffix for p in spilled) == [".stderr", ".stdout"]
    assert all(_mode(p) == 0o600 for p in spilled)
    assert all(len(p.stem) == 32 for p in spilled), "unpredictable names"
    assert f"full text in {home / 'output'}" in out["stdout"]


def test_a_home_others_can_write_is_refused_before_anything_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o777)
    marker = tmp_path / "ran"
    for verb in (("exec", "--", f"touch {marker}"), ("plugins",), ("sessions", "list")):
        proc = dsh(*verb, home=home)
        assert proc.returncode in DSH_FAILED, verb
        assert proc.stderr == (
            f"dsh: refusing DSH_HOME {home}: it is writable by group or others (mode 0777); run `chmod 700 {home}`\n"
        )
    assert not marker.exists()
    # A server listening in it changes nothing: the client does not trust that home either.
    os.chmod(home, 0o700)
    server = ServeProcess(home)
    try:
        os.chmod(home, 0o777)
        proc = dsh("exec", "--", f"touch {marker}", home=home)
        assert proc.returncode in DSH_FAILED and "refusing DSH_HOME" in proc.stderr and not marker.exists()
    finally:
        server.stop()
    os.chmod(home, 0o700)
    assert dsh("exec", "--", f"touch {marker}", home=home).returncode == 0
    assert marker.exists()


def test_a_run_folder_others_can_write_stops_the_command_not_only_its_caches(tmp_path: Path) -> None:
    home, marker = tmp_path / "home", tmp_path / "ran"
    assert dsh("exec", "--", "true", home=home).returncode == 0
    run = home / "run"
    os.chmod(run, 0o777)
    for verb in (("exec", "--", f"touch {marker}"), ("plugins",), ("sessions", "list")):
        proc = dsh(*verb, home=home)
        assert proc.returncode in DSH_FAILED, verb
        why = "it is writable by group or others (mode 0777)"
        assert proc.stderr == f"dsh: refusing dsh run folder {run}: {why}; run `chmod 700 {run}`\n", verb
    assert not marker.exists()
    os.chmod(run, 0o700)
    assert dsh("exec", "--", f"touch {marker}", home=home).returncode == 0 and marker.exists()


def _hook(home: Path, payload: Path) -> Path:
    hooks = home / "hooks"
    hooks.mkdir(parents=True, mode=0o700)
    path = hooks / "claude.json"
    path.write_text(
        json.dumps({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": f"echo ran > {payload}"}]}]}})
    )
    os.chmod(path, 0o600)
    os.chmod(home, 0o700)
    return path


def test_hooks_others_can_write_never_run(tmp_path: Path) -> None:
    home, payload = tmp_path / "home", tmp_path / "hook-ran"
    path = _hook(home, payload)
    os.chmod(path, 0o666)
    proc = dsh("exec", "--", "echo command", home=home)
    assert proc.returncode in DSH_FAILED and proc.stdout == ""
    assert f"refusing claude hooks file {path}: it is writable by group or others (mode 0666)" in proc.stderr
    assert f"run `chmod 600 {path}`" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    os.chmod(path, 0o600)
    os.chmod(path.parent, 0o770)
    proc = dsh("exec", "--", "echo command", home=home)
    assert proc.returncode in DSH_FAILED
    assert proc.stderr == (
        f"dsh: refusing hooks directory {path.parent}: it is writable by group or others (mode 0770); "
        f"run `chmod 700 {path.parent}`\n"
    )
    assert not payload.exists()
    os.chmod(path.parent, 0o700)
    proc = dsh("exec", "--", "echo command", home=home)
    assert proc.returncode == 0 and payload.read_text() == "ran\n", proc.stderr


@needs_root
def test_a_hooks_file_owned_by_another_uid_never_runs(tmp_path: Path) -> None:
    home, payload = tmp_path / "home", tmp_path / "hook-ran"
    path = _hook(home, payload)
    os.chown(path, OTHER_UID, OTHER_UID)
    proc = dsh("exec", "--", "echo command", home=home)
    assert proc.returncode in DSH_FAILED and proc.stdout == ""
    assert f"refusing claude hooks file {path}: it is owned by uid {OTHER_UID}, not by you (uid 0)" in proc.stderr
    assert not payload.exists()
    # The same file named by a deployment is refused the same way.
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text(
        "plugins:\n"
        "  - {id: bash-local, name: bash-local}\n"
        "  - {id: bash-env, name: bash-env}\n"
        "  - {id: tool-bash, name: tool-bash}\n"
        f"  - {{id: hooks, name: hooks, config: {{claude: {path}}}}}\n"
    )
    proc = dsh("exec", "--deployment", str(deployment), "--", "echo command", home=home)
    assert proc.returncode in DSH_FAILED and f"it is owned by uid {OTHER_UID}" in proc.stderr
    assert not payload.exists()


def test_a_deployment_file_others_can_write_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    in_home = home / "deployment.yaml"
    in_home.write_text("plugins:\n  - {id: evil, name: 'os:system'}\n")
    os.chmod(in_home, 0o666)
    proc = dsh("exec", "--", "echo command", home=home)
    assert proc.returncode in DSH_FAILED and proc.stdout == ""
    assert proc.stderr == (
        f"dsh: refusing deployment file {in_home}: it is writable by group or others (mode 0666); "
        f"run `chmod 600 {in_home}`\n"
    )


def test_a_home_that_is_a_file_is_reported_by_the_in_process_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("a file, not a directory\n")
    proc = dsh("exec", "--", "true", home=home)
    assert proc.returncode in DSH_FAILED
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
    assert str(home) in proc.stderr


def _link_as_other_uid(link: Path, target: Path) -> None:
    def make() -> int:
        os.symlink(target, link)
        return 0

    assert as_other_uid(make) == 0
    assert link.lstat().st_uid == OTHER_UID


@needs_root
def test_a_home_that_is_another_users_symlink_is_refused(tmp_path: Path, sticky_tmp: Path) -> None:
    # Root's predictable DSH_HOME in sticky /tmp, made first by someone else as a link to a home that
    # passes every check: they can re-point it at a folder of theirs between dsh's check and its read.
    trusted = tmp_path / "trusted-home"
    trusted.mkdir(mode=0o700)
    home, marker = sticky_tmp / "home", tmp_path / "ran"
    _link_as_other_uid(home, trusted)
    for verb in (("exec", "--", f"touch {marker}"), ("sessions", "list")):
        proc = dsh(*verb, home=home)
        assert proc.returncode in DSH_FAILED, (verb, proc.stderr)
        assert proc.stderr == (
            f"dsh: refusing DSH_HOME {home}: it is a symbolic link owned by uid {OTHER_UID}, not by you (uid 0) "
            f"or root, who can re-point it at any time; remove it (`rm {home}`) and use a path you own\n"
        )
    assert not marker.exists()
    # The same link one level up (the home is `<link>/home`) is refused naming the link.
    proc = dsh("exec", "--", f"touch {marker}", home=home / "sub")
    assert proc.returncode in DSH_FAILED
    assert f"the symbolic link {home} on its way is owned by uid {OTHER_UID}" in proc.stderr
    assert not marker.exists()
    # A link of your own in the same place is followed, as before.
    home.unlink()
    home.symlink_to(trusted)
    assert dsh("exec", "--", f"touch {marker}", home=home).returncode == 0
    assert marker.exists()
