"""Prefix stability: installing or uninstalling a contributor, or switching backends, changes no byte of the tools.

The shell tools' descriptions teach only the generic ``$DSH_*`` convention, so what the model is
offered (and a provider's prompt cache keyed on it) stays the same whatever contributes facts and
wherever the transcript is stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import dsh
from tests.integration.test_pip_install import EXAMPLE, _pip, env  # noqa: F401  (env is a fixture)
from tests.integration.test_requests import recorded_requests

pytestmark = pytest.mark.integration

SCRIPT = {
    "turns": [
        {
            "user": "which region?",
            "steps": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "echo ${DSH_EXAMPLE_REGION-none}"}}]},
                {"text": "done"},
            ],
        }
    ]
}


def _run(python: Path, home: Path, script: Path, deployment: Path | None = None) -> tuple[str, dict[str, Any]]:
    """One scripted turn; the bash call's output and the one request it recorded."""
    extra = ["--deployment", str(deployment)] if deployment else []
    proc = dsh("run", "--script", str(script), "--json", *extra, home=home, python=str(python))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (request,) = recorded_requests(home, out["session_id"], deployment)
    return out["turns"][0]["tool_calls"][0]["output"].splitlines()[0], request


def test_tool_specs_do_not_change_by_a_byte(env: Path, tmp_path: Path) -> None:  # noqa: F811
    home = tmp_path / "home"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    runs: dict[str, dict[str, Any]] = {}

    region, runs["before install"] = _run(env, home, script)
    assert region == "none"
    _pip(env, "install", "--no-deps", "--no-build-isolation", str(EXAMPLE))
    try:
        region, runs["installed"] = _run(env, home, script)
        assert region == "eu-example-1", "the contributor is live in this run"
    finally:
        _pip(env, "uninstall", "-y", "dsh-example-region")
    region, runs["uninstalled"] = _run(env, home, script)
    assert region == "none"

    jsonl = tmp_path / "jsonl.yaml"
    jsonl.write_text("persistence: {backend: jsonl}\n")
    sqlite = tmp_path / "sqlite.yaml"
    sqlite.write_text("persistence: {backend: sqlite}\n")
    _, runs["jsonl file"] = _run(env, home, script, jsonl)
    _, runs["sqlite"] = _run(env, home, script, sqlite)
    assert (home / "sessions.sqlite3").exists(), "the sqlite run really stored its transcript in SQLite"

    reference = json.dumps(runs["before install"]["tools"], ensure_ascii=False)
    assert {t["name"] for t in runs["before install"]["tools"]} >= {"bash", "skill"}
    for name, request in runs.items():
        assert json.dumps(request["tools"], ensure_ascii=False) == reference, name
        assert request["tools_sha256"] == runs["before install"]["tools_sha256"], name
        assert request["model"] == "dsh-scripted", name
