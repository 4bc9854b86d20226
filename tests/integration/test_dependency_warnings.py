"""No library writes to dsh's stderr: warnings raised by dependencies, at import or while a command
runs, never reach a user of ``dsh`` (issue 38). dsh's own reports stay one ``dsh:`` line each.

Every verb runs on a deployment with bash-ssh (``import asyncssh``: under cryptography 51 about ten
``CryptographyDeprecationWarning`` lines) and, installed for real beside every distribution of the
workspace, a bash-env contributor that warns when it is imported and each time it resolves, so the
test does not depend on which cryptography release the lock holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.bash_env import BASH_ENV_GROUP
from tests.helpers import dsh, make_dist
from tests.integration.serve_support import ServeProcess, ask, request

pytestmark = pytest.mark.integration

NOISY = """
import warnings

class NoisyDeprecation(UserWarning):
    pass

warnings.warn("noisy-at-import is deprecated", NoisyDeprecation)

class Contributor:
    name = "noisy"
    variables = {"DSH_NOISY": "a noisy fact"}

    def resolve(self, execution):
        warnings.warn("noisy-at-run: resolving the slow way", RuntimeWarning)
        return {"DSH_NOISY": "noisy"}

c = Contributor()
"""


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    site = tmp_path / "site"
    make_dist(
        site, "dsh-noisy", "1.0", {BASH_ENV_GROUP: {"noisy": "noisy_contributor:c"}}, {"noisy_contributor": NOISY}
    )
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    unreachable = tmp_path / "ssh.yaml"
    unreachable.write_text(
        "plugins:\n  - {id: bash-local, name: bash-ssh, config: "
        f"{{host: 127.0.0.1, port: 1, known_hosts: {known_hosts}, connect_timeout: 5}}}}\n"
    )
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": [{"user": "hello", "steps": [{"text": "hi"}]}]}))
    return {"site": site, "ssh": unreachable, "script": script, "home": tmp_path / "home", "cwd": tmp_path}


def _only_dsh_lines(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    assert "Warning" not in stderr and "warnings.warn" not in stderr, stderr
    assert all(line.startswith("dsh: ") for line in lines), stderr
    return lines


def _run(world: dict[str, Path], *args: str, ssh: bool = True) -> subprocess.CompletedProcess[str]:
    deployment = ["--deployment", str(world["ssh"])] if ssh else []
    verb, *rest = args
    words = [*verb.split(), *rest]
    at = words.index("--") if "--" in words else len(words)  # options before the command
    words[at:at] = deployment
    return dsh(*words, home=world["home"], cwd=world["cwd"], env={"PYTHONPATH": str(world["site"])})


def test_the_noisy_parts_do_warn_outside_dsh(world: dict[str, Path]) -> None:
    """The premise: imported by plain Python, the contributor (and asyncssh under a new cryptography) warn."""
    done = subprocess.run(
        [sys.executable, "-c", "import asyncssh, noisy_contributor; noisy_contributor.c.resolve(None)"],
        env={**os.environ, "PYTHONPATH": str(world["site"])},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "noisy-at-import is deprecated" in done.stderr and "noisy-at-run" in done.stderr


@pytest.mark.parametrize("form", [["--no-server"], ["--no-server", "--json"]], ids=["text", "json"])
def test_exec_on_an_unreachable_host_says_one_line(world: dict[str, Path], form: list[str]) -> None:
    done = _run(world, "exec", *form, "--", "true")
    assert done.returncode == 125
    assert len(_only_dsh_lines(done.stderr)) == 1 and "cannot reach ssh host 127.0.0.1:1" in done.stderr


def test_exec_on_the_default_deployment_runs_the_warning_contributor_silently(world: dict[str, Path]) -> None:
    done = _run(world, "exec", "--no-server", "--", "echo $DSH_NOISY", ssh=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "noisy\n", "")


@pytest.mark.parametrize(
    "verb",
    ["env", "env --json", "plugins", "plugins --json", "skills --json", "sessions list", "sessions list --json"],
)
def test_every_reading_verb_prints_no_library_warning(world: dict[str, Path], verb: str) -> None:
    done = _run(world, verb)
    _only_dsh_lines(done.stderr)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "verb",
    ["sessions show", "sessions locate", "sessions verify --session", "sessions fork", "exec --no-server --session"],
)
def test_every_refusal_stays_one_dsh_line(world: dict[str, Path], verb: str) -> None:
    done = _run(world, verb, "no-such-session", *(["--", "true"] if verb.startswith("exec") else []))
    assert done.returncode in (1, 125)
    assert len(_only_dsh_lines(done.stderr)) == 1, done.stderr


def test_run_prints_no_library_warning(world: dict[str, Path]) -> None:
    done = _run(world, "run", "--script", str(world["script"]), "--json", ssh=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_debug_shows_the_warnings_as_dsh_log_lines(world: dict[str, Path]) -> None:
    """They are not lost: ``--debug`` shows the library log, the warnings in it."""
    done = _run(world, "exec", "--debug", "--no-server", "--", "echo $DSH_NOISY", ssh=False)
    assert done.returncode == 0, done.stderr
    assert "dsh: py.warnings: " in done.stderr and "noisy-at-import is deprecated" in done.stderr
    assert "noisy-at-run" in done.stderr


def test_served_exec_and_the_server_s_log_carry_no_library_warning(world: dict[str, Path]) -> None:
    server = ServeProcess(world["home"], env={"PYTHONPATH": str(world["site"])})
    try:
        assert server.startup == []
        answer = ask(server.path, request("echo $DSH_NOISY", world["cwd"], env={"PATH": os.environ["PATH"]}))
        assert answer is not None and answer["ok"] and answer["warnings"] == [], answer
        assert answer["result"]["stdout"] == "noisy\n"
        served = _run(world, "exec", "--", "echo $DSH_NOISY", ssh=False)
        assert (served.returncode, served.stdout, served.stderr) == (0, "noisy\n", "")
    finally:
        code, rest = server.stop()
    assert "Warning" not in rest and "noisy" not in rest, rest
