"""Cold commands import only what they use: the one-shot ``dsh exec`` and ``dsh env`` load no asyncio.

Each verb runs in a fresh interpreter through the real entry point (``dsh.agent._client.main``,
what ``python -m dsh.agent`` and the ``dsh`` script run), on the default deployment in an empty
home; a wrapper then prints which heavy modules ended up in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

WRAPPER = """
import json, sys
from dsh.agent._client import main

code = main(sys.argv[2:])
sys.stdout.flush()
print(json.dumps({"code": code, "loaded": [m for m in json.loads(sys.argv[1]) if m in sys.modules]}), file=sys.stderr)
"""

NEVER_LOADED = ("asyncio", "concurrent.futures", "ssl")
"""Modules a cold verb must not import when no configured hook needs them."""


def _cold(home: Path, *args: str) -> tuple[int, list[str], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_DEPLOYMENT", "DSH_SESSION_ID")}
    env["DSH_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, json.dumps(NEVER_LOADED), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    *lines, last = done.stderr.splitlines()
    report = json.loads(last)
    return report["code"], report["loaded"], done.stdout


@pytest.mark.parametrize("verb", [("exec", "--no-server", "--", "true"), ("env",)], ids=["exec", "env"])
def test_a_cold_verb_on_the_default_deployment_imports_no_asyncio(tmp_path: Path, verb: tuple[str, ...]) -> None:
    code, loaded, _ = _cold(tmp_path / "home", *verb)
    assert code == 0
    assert loaded == []


def test_a_configured_hook_brings_asyncio_and_still_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    seen = tmp_path / "seen"
    hook = {"type": "command", "command": f"cat > {seen}"}
    (home / "hooks" / "claude.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    code, loaded, out = _cold(home, "exec", "--no-server", "--", "echo ran")
    assert (code, out) == (0, "ran\n")
    assert "asyncio" in loaded and json.loads(seen.read_text())["hook_event_name"] == "PreToolUse"
