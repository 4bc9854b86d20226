"""The registry and the translator hand a child a path fact only where its executor's world can read it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dsh.loader
from dsh.bash import SHELL_EXECUTOR, LocalExecutor, Mount, World
from dsh.bash_env import BASH_ENV, plugin
from dsh.core import Plugin
from dsh.session import DSH_HOME, AgentRef, SessionHeader, SessionLocation, ToolExecution
from dsh.session.persistence import SESSION_PERSISTENCE


class _Transcripts:
    """Only what the translator asks of a backend: where a session's JSONL file is."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def locate(self, header: SessionHeader) -> SessionLocation:
        return SessionLocation(kind="jsonl", path=str(self.root / f"{header.id}.jsonl"))


class _WorldExecutor(LocalExecutor):
    def __init__(self, world: World) -> None:
        super().__init__()
        self.world = world


def _collect(tmp_path: Path, world: World | None) -> dict[str, str]:
    root = dsh.loader.root()
    root.provide(DSH_HOME, tmp_path / "home")
    backend: Any = _Transcripts(tmp_path / "home" / "sessions")
    root.provide(SESSION_PERSISTENCE, backend)
    if world is not None:
        root.plugin(Plugin(name="executor", apply=lambda ctx, cfg: ctx.provide(SHELL_EXECUTOR, _WorldExecutor(world))))
    root.plugin(plugin, {"entry_points": False})
    header = SessionHeader(id="s-1", cwd="/work/project")
    execution = ToolExecution("bash", "c1", agent=AgentRef("main", header), turn_id="s-1:turn-1")
    return dict(root.require(BASH_ENV).collect(execution))


def test_a_local_executor_gets_every_fact(tmp_path: Path) -> None:
    facts = _collect(tmp_path, None)
    assert facts["DSH_HOME"] == str(tmp_path / "home") and facts["DSH_SESSION_JSONL"].startswith(str(tmp_path))


def test_a_world_that_hides_the_home_gets_the_identity_only(tmp_path: Path) -> None:
    world = World("sandbox", (Mount("/", "read"), Mount(str(tmp_path), "none")), label="the test sandbox")
    facts = _collect(tmp_path, world)
    assert facts == {
        "DSH_SHELL": "1",
        "DSH_SESSION_ID": "s-1",
        "DSH_TOOL_CALL_ID": "c1",
        "DSH_TURN_ID": "s-1:turn-1",
        "DSH_AGENT_ID": "s-1",
        "DSH_AGENT_DEPTH": "0",
    }


def test_a_remote_world_gets_its_own_home_and_a_shared_transcript(tmp_path: Path) -> None:
    remote = World("remote", (), home="/srv/dsh", label="host build:22")
    assert _collect(tmp_path, remote)["DSH_HOME"] == "/srv/dsh"
    assert "DSH_SESSION_JSONL" not in _collect(tmp_path, remote)
    shared = remote._replace(mounts=(Mount(str(tmp_path / "home" / "sessions"), "read"),))
    assert _collect(tmp_path, shared)["DSH_SESSION_JSONL"].startswith(str(tmp_path / "home" / "sessions"))


def test_why_not_names_the_world(tmp_path: Path) -> None:
    remote = World("remote", (), label="host build:22")
    assert remote.why_not("/x") == "/x is on this machine, not on host build:22 (no shared mount declares it)"
    sandbox = World("sandbox", (Mount("/", "read"), Mount("/tmp", "none")), workspace="read", label="the sandbox")
    assert sandbox.why_not("/tmp/a") == "/tmp/a is hidden in the sandbox"
    assert sandbox.why_not("/tmp/a/b", cwd="/tmp/a") is None
    assert sandbox._replace(hidden=("/tmp/a/b",)).access("/tmp/a/b/c", cwd="/tmp/a") == "none"
