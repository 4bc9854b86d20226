"""A writer process for the concurrency tests: ``writer.py BACKEND_JSON MODE ARGS...``.

flush PREFIX SESSIONS FLUSHES      write SESSIONS sessions of FLUSHES flushes of 5 events each
resume SESSION_ID TURNS            run TURNS turns on one session as ``dsh`` does: acquire the lock
                                   (waiting while another writer has it), reload, number the turn,
                                   flush, release
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any

from dsh.session import SessionEvent, SessionHeader, SessionLockedError
from dsh.session.persistence import SessionPersistence


def open_backend(spec: dict[str, Any]) -> SessionPersistence:
    if spec["kind"] == "sqlite":
        from dsh.persistence.sqlite import SqlitePersistence

        return SqlitePersistence(spec["path"])
    from dsh.persistence.postgres import PostgresPersistence

    return PostgresPersistence(spec["dsn"], schema=spec["schema"])


def main(argv: list[str]) -> int:
    backend: Any = open_backend(json.loads(argv[0]))
    mode = argv[1]
    if mode == "flush":
        prefix, sessions, flushes = argv[2], int(argv[3]), int(argv[4])
        headers = [SessionHeader(id=f"{prefix}-{n}", cwd="/w") for n in range(sessions)]
        for f in range(flushes):
            for header in headers:
                backend.write(header, [SessionEvent(type="message/user", data={"f": f, "i": i}) for i in range(5)])
    else:
        session_id, turns = argv[2], int(argv[3])
        header = backend.load(session_id).header
        for _ in range(turns):
            deadline = time.monotonic() + 120
            while True:
                try:
                    release = backend.acquire(header)
                    break
                except SessionLockedError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(random.uniform(0.001, 0.02))
            try:
                history = backend.load(session_id).events
                number = sum(1 for e in history if e.type == "turn/start") + 1
                turn_id = f"{session_id}:turn-{number}"
                backend.write(
                    header,
                    [
                        SessionEvent(type="turn/start", data={"turn_id": turn_id}),
                        SessionEvent(type="turn/end", data={"turn_id": turn_id}),
                    ],
                )
            finally:
                release()
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
