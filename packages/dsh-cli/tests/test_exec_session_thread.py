"""Where a served ``dsh exec`` opens its session: never reading a transcript on the server's one loop."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from dsh.cli._exec import exec_command
from dsh.harness import open_runtime
from dsh.session import SESSIONS


def test_under_a_loop_a_new_jsonl_session_opens_in_place_and_a_resume_on_a_thread(tmp_path: Path) -> None:
    """A new JSONL session reads nothing and its lock never waits: opened on the loop. A resume reads the
    stored transcript, of any size (a killed turn's ``.began`` makes it read whole): on a thread, or a
    long session would silence ``dsh serve``'s keep-alives to every other client while it is read."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env["DSH_HOME"] = str(tmp_path / "home")
    with open_runtime(env=env) as runtime:
        store = runtime.ctx.require(SESSIONS)
        opened: list[tuple[str, bool]] = []
        create, resume = store.create, store.resume

        def on_loop_thread() -> bool:
            return threading.current_thread() is threading.main_thread()

        def creating(*args: Any, **kwargs: Any) -> Any:
            opened.append(("create", on_loop_thread()))
            return create(*args, **kwargs)

        def resuming(*args: Any, **kwargs: Any) -> Any:
            opened.append(("resume", on_loop_thread()))
            return resume(*args, **kwargs)

        store.create, store.resume = creating, resuming  # type: ignore[method-assign]
        first = asyncio.run(exec_command(runtime, "true", cwd=str(tmp_path)))
        again = asyncio.run(exec_command(runtime, "true", session_id=first.session_id, cwd=str(tmp_path)))
    assert (first.exit_code, again.exit_code, again.session_id) == (0, 0, first.session_id)
    assert opened == [("create", True), ("resume", False)]
