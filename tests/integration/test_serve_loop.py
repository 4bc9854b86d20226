"""What one served turn may cost every other client of the same ``dsh serve``: its loop must keep beating."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from dsh.cli_fast._wire import MISSED_KEEPALIVES, frame, recv_frame
from dsh.persistence.jsonl import JsonlPersistence
from dsh.session import SessionEvent, SessionStore
from tests.integration.serve_support import ServeProcess, ask, connect, request

pytestmark = pytest.mark.integration

KEEPALIVE = 0.5
"""The test server's ``--keepalive``: a client gives up after ``MISSED_KEEPALIVES`` times this in silence."""


def _grow_with_an_unsettled_record(path: str, session_id: str, megabytes: int) -> None:
    """Append ``megabytes`` of tool output to the session's transcript and leave a ``.began`` record, as a
    server killed during its next command leaves it (so the next resume reads the transcript whole)."""
    backend = JsonlPersistence(os.path.dirname(os.path.dirname(path)), fsync=False)
    session = SessionStore(lambda: backend).resume(session_id, lock=True, history=False)
    output = "x" * 100_000
    events = [
        SessionEvent(type="tool/result", data={"call_id": f"c{i}", "output": output}) for i in range(megabytes * 10)
    ]
    backend.write(session.header, events)
    began = SessionEvent(type="tool/began", data={"call_id": "killed", "name": "bash", "arguments": {}})
    backend.begin(session.header, began)
    session.release()


def test_resuming_a_long_session_does_not_silence_the_server_for_its_other_clients(tmp_path: Path) -> None:
    """A served ``dsh exec --session`` of a long session (a command of it killed, so it is read whole)
    must not hold up the keep-alives of another client's running command until that client gives up
    (``MISSED_KEEPALIVES`` missed) and reports its command as lost while it still runs."""
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    server = ServeProcess(home, "--keepalive", str(KEEPALIVE))
    try:
        first = ask(server.path, request("true", cwd))
        assert first is not None and first["ok"], first
        _grow_with_an_unsettled_record(
            first["result"]["location"]["path"], first["result"]["session_id"], megabytes=150
        )
        silences: list[float] = []
        with connect(server.path) as other:
            other.sendall(frame(json.dumps(request("sleep 8", cwd)).encode()))

            def listen() -> None:
                heard = time.monotonic()
                while True:
                    message = recv_frame(other)
                    now = time.monotonic()
                    silences.append(now - heard)
                    heard = now
                    if message is None or "keepalive" not in message:
                        return

            listener = threading.Thread(target=listen)
            listener.start()
            time.sleep(1)
            resumed = ask(server.path, request("true", cwd, options=("--session", first["result"]["session_id"])))
            assert resumed is not None and resumed["ok"], resumed
            listener.join(timeout=60)
        assert max(silences) < MISSED_KEEPALIVES * KEEPALIVE, (
            f"the other client heard nothing for {max(silences):.2f} s: it gives up after "
            f"{MISSED_KEEPALIVES * KEEPALIVE:g} s and reports its command lost"
        )
    finally:
        server.stop()
