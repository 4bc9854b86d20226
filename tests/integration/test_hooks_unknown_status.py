"""A PreToolUse hook whose exit status dsh cannot know (another reaper took it) never lets the
command it may have blocked run: an unknown decision of a guard is not an allow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import dsh, make_dist

pytestmark = pytest.mark.integration

REAPS_EVERY_CHILD = """
import signal
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # a plugin's "never leave zombies"
class C:
    name = "ign"
    variables = {"DSH_IGN": "x"}
    def resolve(self, execution):
        return {"DSH_IGN": "1"}
c = C()
"""


@pytest.mark.parametrize(
    "hook",
    [
        "cat >/dev/null; echo 'blocked: rm -rf' >&2; exit 2",
        'cat >/dev/null; echo \'{"hookSpecificOutput": {"hookEventName": "PreToolUse", '
        '"permissionDecision": "deny", "permissionDecisionReason": "no"}}\'',
    ],
    ids=["exit-2", "json-deny"],
)
def test_a_guard_hook_with_an_unknown_status_does_not_let_the_command_run(tmp_path: Path, hook: str) -> None:
    home, site, marker = tmp_path / "home", tmp_path / "site", tmp_path / "ran"
    make_dist(
        site, "dsh-ign", entry_points={"dsh.bash_env": {"ign": "ignmod:c"}}, modules={"ignmod": REAPS_EVERY_CHILD}
    )
    (home / "hooks").mkdir(parents=True)
    entry = {"hooks": [{"type": "command", "command": hook}]}
    (home / "hooks" / "claude.json").write_text(json.dumps({"hooks": {"PreToolUse": [entry]}}))
    done = dsh("exec", "--no-server", "--", f"touch {marker}", home=home, env={"PYTHONPATH": str(site)})
    assert not marker.exists(), f"the command a PreToolUse hook may have blocked ran: {done}"
