"""The DSH_SESSION_JSONL translator follows whichever persistence backend is the current service."""

from __future__ import annotations

from pathlib import Path

import dsh.loader
from dsh.bash_env import BASH_ENV, plugin
from dsh.core import Context, Plugin
from dsh.persistence.jsonl import JsonlPersistence
from dsh.persistence.sqlite import SqlitePersistence
from dsh.session import DSH_HOME, AgentRef, SessionHeader, ToolExecution
from dsh.session.persistence import SESSION_PERSISTENCE

HEADER = SessionHeader(id="sess-1", cwd="/work/project")
AGENT_CALL = ToolExecution("bash", "c1", agent=AgentRef("main", HEADER), turn_id="sess-1:turn-1")
BARE_CALL = ToolExecution("bash", "c2")


def _harness(tmp_path: Path) -> Context:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path / "home")
    root.plugin(plugin, {"entry_points": False})
    return root


def test_translator_follows_the_current_persistence_service(tmp_path: Path) -> None:
    root = _harness(tmp_path)
    registry = root.require(BASH_ENV)
    assert "DSH_SESSION_JSONL" not in registry.collect(AGENT_CALL), "no persistence: no path"

    jsonl = root.plugin(
        Plugin(name="jsonl", apply=lambda ctx, cfg: ctx.provide(SESSION_PERSISTENCE, JsonlPersistence(tmp_path / "s")))
    )
    path = registry.collect(AGENT_CALL)["DSH_SESSION_JSONL"]
    assert path == JsonlPersistence(tmp_path / "s").locate(HEADER).path
    assert "DSH_SESSION_JSONL" not in registry.collect(BARE_CALL), "no agent: no path"
    assert not (tmp_path / "s").exists(), "collecting creates nothing"

    jsonl.dispose()
    sqlite = root.plugin(
        Plugin(
            name="sqlite", apply=lambda ctx, cfg: ctx.provide(SESSION_PERSISTENCE, SqlitePersistence(tmp_path / "db"))
        )
    )
    assert "DSH_SESSION_JSONL" not in registry.collect(AGENT_CALL), "sqlite has no per-session file"

    sqlite.dispose()
    root.plugin(
        Plugin(name="jsonl2", apply=lambda ctx, cfg: ctx.provide(SESSION_PERSISTENCE, JsonlPersistence(tmp_path / "t")))
    )
    assert registry.collect(AGENT_CALL)["DSH_SESSION_JSONL"].startswith(str(tmp_path / "t"))
