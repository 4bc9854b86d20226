"""Many processes writing one store at once (SQLite and PostgreSQL): nothing lost, turn ids unique."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dsh.session import SessionEvent, SessionHeader
from dsh.session.persistence import SessionPersistence

from .writer import open_backend

WRITER = Path(__file__).with_name("writer.py")

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "sqlite":
        return {"kind": "sqlite", "path": str(tmp_path / "db.sqlite3")}
    server = request.getfixturevalue("postgres_server")
    return {"kind": "postgres", "dsn": server.dsn, "schema": request.getfixturevalue("pg_schema")}


def _run_all(spec: dict[str, Any], jobs: list[list[str]]) -> None:
    procs = [
        subprocess.Popen([sys.executable, str(WRITER), json.dumps(spec), *job], stderr=subprocess.PIPE, text=True)
        for job in jobs
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-2000:]


def test_8_processes_x_16_sessions_flushing_at_once_lose_nothing(spec: dict[str, Any]) -> None:
    _run_all(spec, [["flush", f"p{p}", "16", "3"] for p in range(8)])
    backend: SessionPersistence = open_backend(spec)
    try:
        assert len(backend.list()) == 8 * 16
        for p in range(8):
            for s in range(16):
                events = backend.load(f"p{p}-{s}").events
                assert [(e.data["f"], e.data["i"]) for e in events] == [(f, i) for f in range(3) for i in range(5)]
    finally:
        backend.close()


@pytest.mark.parametrize("resumers", [2, 20])
def test_concurrent_resumers_are_serialised_and_turn_ids_stay_unique(spec: dict[str, Any], resumers: int) -> None:
    backend: SessionPersistence = open_backend(spec)
    header = SessionHeader(id="shared-session", cwd="/w")
    backend.write(header, [SessionEvent(type="session/start")])
    turns = 15 if resumers == 2 else 2
    _run_all(spec, [["resume", header.id, str(turns)] for _ in range(resumers)])
    try:
        events = backend.load(header.id).events
        starts = [e.data["turn_id"] for e in events if e.type == "turn/start"]
        assert len(starts) == resumers * turns
        assert [k for k, n in Counter(starts).items() if n > 1] == []
        assert starts == [f"{header.id}:turn-{n}" for n in range(1, resumers * turns + 1)]
        # Each turn's events are contiguous: no writer interleaved with another's turn.
        kinds = [e.type for e in events[1:]]
        assert kinds == ["turn/start", "turn/end"] * (resumers * turns)
    finally:
        backend.close()
