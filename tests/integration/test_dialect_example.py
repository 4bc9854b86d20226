"""The third-party hook dialect of docs/extension-points/hook-dialects.md, installed and run as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import dsh, make_dist, remove_dist, touch_dir

pytestmark = pytest.mark.integration

PAGE = REPO / "docs" / "extension-points" / "hook-dialects.md"


def _example() -> str:
    """The page's Python block: the whole dialect module."""
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)
    return code


def _entry() -> dict[str, str]:
    (toml,) = re.findall(r"```toml\n(.*?)```", PAGE.read_text(), re.DOTALL)
    name, value = toml.splitlines()[1].split(" = ")
    return {name: value.strip('"')}


def _home(tmp_path: Path, log: Path) -> Path:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    guard = (
        f'p=$(cat); echo "$p $ACME_SESSION" > {log}; '
        "echo \"$p\" | grep -q 'rm -rf' && { echo 'acme says no' >&2; exit 2; }; exit 0"
    )
    hooks = {"hooks": {"before_shell": [{"hooks": [{"type": "command", "command": guard}]}]}}
    (home / "hooks" / "acme.json").write_text(json.dumps(hooks))
    return home


def test_the_documented_dialect_installs_runs_and_goes_with_its_distribution(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = make_dist(site, "dsh-acme", "1.0", {"dsh.hook_dialects": _entry()}, {"dsh_acme": _example()})
    touch_dir(site)
    log = tmp_path / "seen"
    home = _home(tmp_path, log)
    env = {"PYTHONPATH": str(site), "ACME_SESSION": "outer"}

    blocked = dsh("exec", "--", "rm -rf build", home=home, cwd=tmp_path, env=env)
    assert blocked.returncode == 126 and "acme says no" in blocked.stderr, blocked.stderr
    payload_line = log.read_text()
    payload = json.loads(payload_line[: payload_line.rindex("}") + 1])
    assert payload["hook_event_name"] == "before_shell" and payload["tool_name"] == "shell"
    assert set(payload) == {"session_id", "cwd", "hook_event_name", "tool_name", "tool_input"}
    assert payload_line.rstrip().endswith(payload["session_id"])  # its ACME_SESSION, not the outer one
    child = dsh("exec", "--", 'echo "${ACME_SESSION-unset}"', home=home, cwd=tmp_path, env=env)
    assert child.stdout == "unset\n", child.stderr  # the outer Acme's identity never reaches a child
    listed = dsh("plugins", home=home, env=env)
    assert re.search(r"^dsh\.hook_dialects +acme +dsh-acme 1\.0 +active$", listed.stdout, re.M), listed.stdout

    remove_dist(info, ("dsh_acme",))
    touch_dir(site)
    ran = dsh("exec", "--", 'echo "ran ${ACME_SESSION-unset}"', home=home, cwd=tmp_path, env=env)
    assert ran.returncode == 0 and ran.stdout == "ran outer\n", ran.stderr  # its hooks and scrubbing are gone
    assert " acme " not in dsh("plugins", home=home, env=env).stdout


def test_a_broken_dialect_entry_is_a_warning_and_the_others_still_guard(tmp_path: Path) -> None:
    site = tmp_path / "site"
    make_dist(
        site,
        "dsh-broken",
        "1.0",
        {"dsh.hook_dialects": {"broken": "dsh_broken:DIALECT"}},
        {"dsh_broken": "DIALECT = 42\n"},
    )
    touch_dir(site)
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    guard = {"type": "command", "command": "echo 'claude guard' >&2; exit 2"}
    (home / "hooks" / "claude.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [guard]}]}}))
    proc = dsh("exec", "--", "echo hi", home=home, cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert proc.returncode == 126 and "claude guard" in proc.stderr
    (warning,) = [line for line in proc.stderr.splitlines() if "hooks:broken" in line]
    assert warning.startswith("dsh: warning:") and "not a named dsh.hooks.dialect.HookDialect" in warning


FAULTY = """
from dsh.hooks.dialect import HookDialect


class Faulty(HookDialect):
    name = "faulty"
    peer = "Faulty Agent"
    events = frozenset({{"PreToolUse"}})
    event_keys = {{"PreToolUse": frozenset({{"session_id", "hook_event_name", "tool_name", "tool_input"}})}}

    def {method}(self, *args, **kwargs):
        raise RuntimeError("the dialect's own bug")


DIALECT = Faulty()
"""


@pytest.mark.parametrize("method", ["interpret", "extra_fields", "hook_env"])
def test_a_dialect_whose_code_raises_fails_its_hooks_closed_in_one_line(tmp_path: Path, method: str) -> None:
    site = tmp_path / "site"
    entry = {"dsh.hook_dialects": {"faulty": "dsh_faulty:DIALECT"}}
    make_dist(site, "dsh-faulty", "1.0", entry, {"dsh_faulty": FAULTY.format(method=method)})
    touch_dir(site)
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    hook = {"type": "command", "command": "true"}
    (home / "hooks" / "faulty.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    victim = tmp_path / "ran"
    proc = dsh("exec", "--", f"touch {victim}", home=home, cwd=tmp_path, env={"PYTHONPATH": str(site)})
    # A guard whose verdict cannot be read allowed nothing: refused, said in one line, no traceback.
    assert proc.returncode == 126 and not victim.exists(), proc.stderr
    assert "Traceback" not in proc.stderr
    said = "the Faulty Agent hook dialect ('faulty') failed: RuntimeError: the dialect's own bug"
    assert f"{said}; fix or uninstall the distribution that provides it" in proc.stderr
