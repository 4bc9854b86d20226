"""What the write-ahead "command began" record costs a shell call: ``Session.begin`` (durable: fsynced,
committed) against the executor's own spawn of ``true``, per backend, in one run.

    python benchmarks/write_ahead.py [--rounds N] [--postgres]    # or as part of `hatch run bench`

Each round times one record, one ``LocalExecutor`` run of ``true`` (no event loop for either) and,
to read the figure by, one bare 200-byte append + ``fsync`` on the same disk, taking turns. Every
16 records the turn is flushed (untimed), as a turn of 16 calls would be, so the JSONL ``.began``
file and the ``began`` tables stay the size a real turn leaves them.
PostgreSQL runs on a throw-away local server (fsync on) when ``--postgres`` (full runs) is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dsh.bash import BashExecRequest, LocalExecutor
from dsh.persistence.jsonl import JsonlPersistence
from dsh.persistence.sqlite import SqlitePersistence
from dsh.session import SessionStore
from dsh.session.persistence import SessionPersistence

TURN_CALLS = 16
"""Records between two flushes (the default ``max_parallel_tools``: one wide answer)."""


@contextmanager
def _postgres() -> Iterator[SessionPersistence | str]:
    """A PostgreSQL backend on a throw-away server, or why there is none."""
    from dsh.persistence.postgres import PostgresPersistence
    from dsh.persistence.postgres.testing import ServerUnavailable, TemporaryServer

    server = TemporaryServer()
    try:
        server.setup()
    except ServerUnavailable as exc:
        server.cleanup()
        yield str(exc)
        return
    backend = PostgresPersistence(server.dsn, schema="bench_began")
    try:
        yield backend
    finally:
        backend.close()
        server.cleanup()


def _measure(backend: SessionPersistence, tmp: Path, rounds: int) -> dict[str, float]:
    store = SessionStore(lambda: backend)
    session = store.create(str(tmp), lock=True)
    turn_id = session.new_turn_id()
    request = BashExecRequest("true", cwd=str(tmp))
    local = LocalExecutor(spill_dir=tmp / "spill")
    local.run_sync(request)  # warm: the first spawn pays for imports and caches
    ours: list[float] = []
    floor: list[float] = []
    flushed: list[float] = []
    n = 0
    scratch = os.open(tmp / "fsync-floor", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def disk() -> None:
        os.write(scratch, b"x" * 200)
        os.fsync(scratch)

    def record() -> None:
        nonlocal n
        n += 1
        session.record("tool/call", call_id=f"c{n}", name="bash", arguments={"command": "true"})
        session.begin(f"c{n}", name="bash", arguments={"command": "true"}, turn_id=turn_id)

    steps: tuple[tuple[list[float], Callable[[], object]], ...] = (
        (ours, record),
        (floor, lambda: local.run_sync(request)),
        (flushed, disk),
    )
    for round_ in range(rounds):
        for taken, step in steps if round_ % 2 else reversed(steps):
            start = time.perf_counter()
            step()
            taken.append(time.perf_counter() - start)
        if n % TURN_CALLS == 0:
            session.flush()  # settles the turn's records (untimed), as the turn's checkpoint does
            session.acquire()
    session.flush()
    os.close(scratch)
    o, f, d = statistics.median(ours), statistics.median(floor), statistics.median(flushed)
    return {
        "median_ms": o * 1000,
        "spawn_median_ms": f * 1000,
        "ratio": o / f,
        "fsync_median_ms": d * 1000,
        "over_one_fsync": o / d,
        "rounds": rounds,
    }


def bench_write_ahead(tmp: Path, rounds: int, *, postgres: bool = False) -> dict[str, Any]:
    """``began_record_<backend>``: one durable record against one spawn of ``true``, medians and ratio."""
    tmp.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    jsonl = JsonlPersistence(tmp / "sessions")
    out["began_record_jsonl"] = _measure(jsonl, tmp, rounds)
    jsonl.close()
    sqlite = SqlitePersistence(tmp / "sessions.sqlite3")
    out["began_record_sqlite"] = _measure(sqlite, tmp, rounds)
    sqlite.close()
    if postgres:
        with _postgres() as backend:
            if isinstance(backend, str):
                out["began_record_postgres"] = {"skipped": backend}
            else:
                out["began_record_postgres"] = _measure(backend, tmp, rounds)
    out["began_record_load"] = {"loadavg_1m": os.getloadavg()[0], "cpus": os.cpu_count()}
    return out


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--postgres", action="store_true", help="also PostgreSQL, on a throw-away local server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-began-") as tmp:
        print(json.dumps(bench_write_ahead(Path(tmp), args.rounds, postgres=args.postgres), indent=2))


if __name__ == "__main__":
    main()
