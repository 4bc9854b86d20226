"""The rough edges an integrator's first hour met (issue 38 item 5): each refusal one `dsh:` line on
stderr, exit statuses that match the help, the verb's own usage, grammar, and `dsh env` telling the truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh.bash_env import BASH_ENV_GROUP
from tests.helpers import dsh, make_dist

pytestmark = pytest.mark.integration

FAILING = """
class Contributor:
    name = "flaky"
    variables = {"DSH_FLAKY": "a fact from a backend that is down"}

    def resolve(self, execution):
        raise RuntimeError("backend down")

class Counting:
    name = "counting"
    variables = {"DSH_COUNTING": "a fact returned as a number"}

    def resolve(self, execution):
        return {"DSH_COUNTING": 3}

flaky = Contributor()
counting = Counting()
"""


def _site(tmp_path: Path, *names: str) -> dict[str, str]:
    site = tmp_path / "site"
    make_dist(site, "dsh-failing", "1.0", {BASH_ENV_GROUP: {n: f"failing_contributors:{n}" for n in names}}, {
        "failing_contributors": FAILING
    })  # fmt: skip
    return {"PYTHONPATH": str(site)}


def test_dsh_env_reports_a_contributor_s_failure_instead_of_passed(tmp_path: Path) -> None:
    env = _site(tmp_path, "flaky")
    home = tmp_path / "home"
    listed = dsh("env", home=home, env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    block = listed.stdout.split("DSH_FLAKY\n", 1)[1].split("\nDSH_", 1)[0]
    assert "here: passed" not in block
    assert (
        "here: not passed (its last call failed: contributor 'flaky' (dsh-failing 1.0) raised RuntimeError while "
        "resolving: backend down)"
    ) in block
    rows = {r["key"]: r for r in json.loads(dsh("env", "--json", home=home, env=env, cwd=tmp_path).stdout)["variables"]}
    assert rows["DSH_FLAKY"]["passes"] is False and "backend down" in rows["DSH_FLAKY"]["why"]
    assert rows["DSH_SESSION_ID"]["passes"] is True  # the others still say what they do


def test_dsh_env_session_shows_the_failure_rather_than_failing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = json.loads(dsh("exec", "--json", "--no-server", "--", "true", home=home).stdout)
    listed = dsh("env", "--session", made["session_id"], "--json", home=home, env=_site(tmp_path, "flaky"))
    assert listed.returncode == 0, listed.stderr
    rows = {r["key"]: r for r in json.loads(listed.stdout)["variables"]}
    assert rows["DSH_FLAKY"]["passes"] is False and "backend down" in rows["DSH_FLAKY"]["why"]


def test_a_contributor_returning_an_int_is_named_with_grammar(tmp_path: Path) -> None:
    done = dsh("exec", "--no-server", "--", "true", home=tmp_path / "home", env=_site(tmp_path, "counting"))
    assert done.returncode == 125
    assert done.stderr == (
        "dsh: contributor 'counting' (dsh-failing 1.0) returned an int for key 'DSH_COUNTING', not a string\n"
    )


@pytest.mark.parametrize(
    ("words", "verb", "unknown"),
    [
        (["exec", "--jsn", "--", "true"], "dsh exec", "--jsn"),
        (["sessions", "verify", "--sesion", "x"], "dsh sessions verify", "--sesion x"),
        (["env", "--jsn"], "dsh env", "--jsn"),
    ],
)
def test_an_unknown_option_answers_with_the_verb_s_own_usage(
    tmp_path: Path, words: list[str], verb: str, unknown: str
) -> None:
    done = dsh(*words, home=tmp_path / "home")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"usage: {verb} "), done.stderr
    assert done.stderr.endswith(f"{verb}: error: unrecognized arguments: {unknown}\n"), done.stderr


def test_verify_of_an_unknown_session_is_one_dsh_line_on_stderr(tmp_path: Path) -> None:
    done = dsh("sessions", "verify", "--session", "nope", home=tmp_path / "home")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "dsh: no stored session nope\n")


def test_locate_s_help_promises_the_status_it_exits_with(tmp_path: Path) -> None:
    home = tmp_path / "home"
    deployment = tmp_path / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    made = json.loads(dsh("exec", "--json", "--deployment", str(deployment), "--", "true", home=home).stdout)
    located = dsh("sessions", "locate", made["session_id"], "--deployment", str(deployment), home=home)
    assert located.returncode == 1 and located.stdout == "" and len(located.stderr.splitlines()) == 1
    helped = " ".join(dsh("sessions", "locate", "--help", home=home).stdout.split())
    assert "stdout stays empty, one line on stderr says so, and the exit status is 1" in helped
