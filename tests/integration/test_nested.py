from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import dsh

pytestmark = pytest.mark.integration


def test_nested_dsh_exec_sees_the_inner_session(tmp_path: Path) -> None:
    proc = dsh("exec", "--json", "--", "dsh", "exec", "--json", "--", "echo $DSH_SESSION_ID", home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    outer = json.loads(proc.stdout)
    inner = json.loads(outer["stdout"])
    assert inner["stdout"].strip() == inner["session_id"]
    assert inner["session_id"] != outer["session_id"]
    assert inner["location"]["path"] != outer["location"]["path"]


def test_nested_plain_form_prints_the_inner_id(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = dsh("exec", "--", "dsh", "exec", "--", "echo $DSH_SESSION_ID", home=home)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.strip()
    listed = json.loads(dsh("sessions", "list", "--json", home=home).stdout)["sessions"]
    ids = {s["id"] for s in listed}
    assert printed in ids and len(ids) == 2
    outer = next(s for s in listed if s["id"] != printed)
    assert printed != outer["id"]


def test_resuming_the_shells_own_unflushed_session_says_why(tmp_path: Path) -> None:
    proc = dsh("exec", "--", "dsh exec --session $DSH_SESSION_ID -- true", home=tmp_path / "home")
    assert proc.returncode != 0
    assert "is the one this shell belongs to" in proc.stderr
