"""Misbehaving third-party contributors, installed for real, under `dsh exec`, `dsh plugins` and `dsh serve`.

Each contributor misbehaves only for calls whose session directory bears its name, so one server
shows the misbehaving call failing with its one-line message while other calls and clients go on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.bash_env import BASH_ENV_GROUP
from tests.helpers import dsh, make_dist
from tests.integration.serve_support import DSH_FAILED, ServeProcess, answer_of, ask, connect, frame, request

pytestmark = pytest.mark.integration

BAD = """
import os
import time

def _when(name, execution):
    session = execution.session
    return session is not None and os.path.basename(session.cwd) == name

class Contributor:
    def __init__(self, name, behave):
        self.name = name
        self.variables = {"DSH_" + name.upper(): name + " fact"}
        self._behave = behave

    def resolve(self, execution):
        if _when(self.name, execution):
            return self._behave()
        return {"DSH_" + self.name.upper(): "fine"}

def _sleep():
    time.sleep(30)
    return {}

def _exit():
    raise SystemExit(0)

def _raise():
    raise RuntimeError("backend down")

slow = Contributor("slow", _sleep)
huge = Contributor("huge", lambda: {"DSH_HUGE": "x" * 10_000_000})
raising = Contributor("raising", _raise)
exiting = Contributor("exiting", _exit)
empty = Contributor("empty", lambda: None)
"""

DIST = "dsh-bad-contributors"
NAMES = ("slow", "huge", "raising", "exiting", "empty")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site"
    make_dist(
        path,
        DIST,
        "2.0",
        {BASH_ENV_GROUP: {**{n: f"bad_contributors:{n}" for n in NAMES}, "at-import": "exits_on_import:c"}},
        {"bad_contributors": BAD, "exits_on_import": "raise SystemExit(0)\n"},
    )
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in (*NAMES, "calm"):
        out[name] = tmp_path / "work" / name
        out[name].mkdir(parents=True)
    return out


def _expected(name: str) -> str:
    who = f"contributor '{name}' ({DIST} 2.0)"
    return {
        "slow": f"{who} did not resolve within its 1 s deadline (bash-env config resolve_timeout)",
        "huge": f"{who} returned 10000000 bytes for key 'DSH_HUGE'; the maximum is 32768 bytes",
        "raising": f"{who} raised RuntimeError while resolving: backend down",
        "exiting": f"{who} raised SystemExit while resolving: 0",
        "empty": f"{who} returned None from resolve(), not a mapping of keys to strings",
    }[name]


IMPORT_WARNING = (
    f"dsh: warning: plugin 'bash-env:at-import' (from {DIST} 2.0) failed: entry point 'at-import' in group "
    f"'dsh.bash_env' (exits_on_import:c, from {DIST} 2.0) failed to load: SystemExit: 0"
)


def test_in_process_exec_and_plugins_survive_every_misbehaviour(
    site: Path, dirs: dict[str, Path], tmp_path: Path
) -> None:
    env = {"PYTHONPATH": str(site)}
    home = tmp_path / "home"
    plugins = dsh("plugins", "--json", home=home, env=env)
    assert plugins.returncode == 0, plugins.stderr
    rows = {r["name"]: r for r in json.loads(plugins.stdout)["plugins"] if r["group"] == BASH_ENV_GROUP}
    assert rows["at-import"]["state"] == "failed" and "SystemExit: 0" in rows["at-import"]["error"]
    assert rows["exiting"]["state"] == "active"
    for name in ("exiting", "empty", "calm"):
        proc = dsh(
            "exec", "--no-server", "--cwd", str(dirs[name]), "--", "echo ran; echo $DSH_RAISING", home=home, env=env
        )
        assert IMPORT_WARNING in proc.stderr.splitlines()
        if name == "calm":
            assert proc.returncode == 0 and proc.stdout == "ran\nfine\n", proc.stderr
        else:
            assert proc.returncode in DSH_FAILED and proc.stdout == "", proc.stderr
            assert proc.stderr.splitlines()[-1] == "dsh: " + _expected(name)


@pytest.fixture
def server(site: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    running = ServeProcess(tmp_path / "home", env={"PYTHONPATH": str(site)})
    yield running
    running.stop()


def test_served_calls_fail_alone_while_other_clients_go_on(server: ServeProcess, dirs: dict[str, Path]) -> None:
    assert server.startup == [IMPORT_WARNING + "\n"]
    env = {"PATH": os.environ["PATH"]}
    with connect(server.path) as slow:
        slow.sendall(frame(json.dumps(request("echo never", dirs["slow"], env=env)).encode()))
        # The slow contributor holds only its own call: the server answers others meanwhile.
        calm = ask(server.path, request("echo $DSH_SLOW $DSH_HUGE", dirs["calm"], env=env))
        assert calm is not None and calm["ok"], calm
        assert calm["result"]["stdout"] == "fine fine\n"
        assert calm["warnings"] == [IMPORT_WARNING.removeprefix("dsh: warning: ")]
        answer = answer_of(slow)
    assert answer is not None and answer["ok"]
    # Nothing ran: no status, the message in "error" (the 125 contract), not in the command's stderr.
    assert (answer["result"]["exit_code"], answer["result"]["stderr"]) == (None, "")
    assert answer["result"]["error"] == _expected("slow")
    for name in ("huge", "raising", "exiting", "empty"):
        answer = ask(server.path, request("echo never", dirs[name], env=env))
        assert answer is not None and answer["ok"], answer
        assert answer["result"]["exit_code"] is None and answer["result"]["stdout"] == "", answer
        assert (answer["result"]["error"], answer["result"]["stderr"]) == (_expected(name), "")
    assert server.proc.poll() is None, "a SystemExit in a contributor never stops the server"
    answer = ask(server.path, request("echo still here", dirs["calm"], env=env))
    assert answer is not None and answer["result"]["stdout"] == "still here\n"


def test_json_after_a_contributor_failure_follows_the_125_contract(
    site: Path, dirs: dict[str, Path], tmp_path: Path
) -> None:
    env = {"PYTHONPATH": str(site)}
    proc = dsh(
        "exec", "--no-server", "--json", "--cwd", str(dirs["raising"]), "--", "echo never",
        home=tmp_path / "home", env=env,
    )  # fmt: skip
    assert proc.returncode == 125, proc.stderr
    document = json.loads(proc.stdout)
    assert (document["exit_code"], document["stdout"], document["stderr"]) == (None, "", "")
    assert document["error"] == _expected("raising")
    assert document["session_id"] and proc.stderr.splitlines()[-1] == "dsh: " + _expected("raising")


def test_an_optional_contributors_failure_is_one_warning_and_its_keys_are_absent(
    site: Path, dirs: dict[str, Path], tmp_path: Path
) -> None:
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text("plugins:\n  - id: bash-env\n    config: {policy: {raising: optional, slow: optional}}\n")
    env = {"PYTHONPATH": str(site)}
    command = "echo ran; echo ${DSH_RAISING-absent} ${DSH_SLOW-absent} $DSH_HUGE"
    for name, absent in (("raising", "absent fine"), ("slow", "fine absent")):
        proc = dsh(
            "exec", "--no-server", "--deployment", str(deployment), "--cwd", str(dirs[name]), "--", command,
            home=tmp_path / "home", env=env,
        )  # fmt: skip
        assert (proc.returncode, proc.stdout) == (0, f"ran\n{absent} fine\n"), proc.stderr
        warnings = [line for line in proc.stderr.splitlines() if line != IMPORT_WARNING]
        assert warnings == [
            f"dsh: warning: {_expected(name)} (optional in the bash-env config: its keys are left out of this call)"
        ]
    # A required one (the default) still fails the call.
    proc = dsh(
        "exec", "--no-server", "--deployment", str(deployment), "--cwd", str(dirs["huge"]), "--", command,
        home=tmp_path / "home", env=env,
    )  # fmt: skip
    assert proc.returncode == 125 and proc.stderr.splitlines()[-1] == "dsh: " + _expected("huge")
    bad = tmp_path / "bad.yaml"
    bad.write_text("plugins:\n  - id: bash-env\n    config: {policy: {raising: maybe}}\n")
    proc = dsh("exec", "--no-server", "--deployment", str(bad), "--", "true", home=tmp_path / "home", env=env)
    assert proc.returncode == 125 and "config.policy" in proc.stderr, proc.stderr
