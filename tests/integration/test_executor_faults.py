"""The executor under a hostile environment and hostile timing, through the real ``dsh`` command,
in-process and served: ambient shell code, live spills, stalls across the deadline, kills."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import dsh
from tests.integration.serve_support import ServeProcess

pytestmark = pytest.mark.integration


@pytest.fixture(params=["in-process", "served"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeProcess | None]:
    """Each test runs against a ``dsh exec`` alone and against one a ``dsh serve`` answers."""
    if request.param == "in-process":
        yield None
        return
    server = ServeProcess(tmp_path / "home")
    yield server
    server.stop()


def _exec(home: Path, *command: str, env: dict[str, str] | None = None) -> dict[str, object]:
    proc = dsh("exec", "--json", "--", *command, home=home, env=env)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_ambient_xtrace_and_its_prompt_do_not_reach_the_command(tmp_path: Path, served: ServeProcess | None) -> None:
    env = {
        "SHELLOPTS": "xtrace",
        "PS4": "$((DSH_SHELL=0,DSH_SESSION_ID=666))",
        "BASH_FUNC_printenv%%": "() { echo faked; }",
    }
    outcome = _exec(tmp_path / "home", "printenv DSH_SHELL; bash -c 'printenv DSH_SHELL'", env=env)
    assert (outcome["exit_code"], outcome["stdout"], outcome["stderr"]) == (0, "1\n1\n", "")
