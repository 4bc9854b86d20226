"""Review regression: a status another reaper took is never reported as success."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from types import FrameType

from dsh.bash import BashExecRequest, ExecError, LocalExecutor


def _reap_every_child(signum: int, frame: FrameType | None) -> None:
    """What a reap-everything child watcher (asyncio's FastChildWatcher, many daemons) does."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def test_a_status_taken_by_another_waitpid_is_not_success(tmp_path: Path) -> None:
    executor = LocalExecutor(spill_dir=tmp_path)
    previous = signal.signal(signal.SIGCHLD, _reap_every_child)
    try:
        try:
            result = asyncio.run(executor.run(BashExecRequest(command="exit 2")))
        except ExecError:
            return  # refusing to guess is right
        # A blocking hook exits 2: reporting 0 would let the tool call through.
        assert result.exit_code != 0
    finally:
        signal.signal(signal.SIGCHLD, previous)
