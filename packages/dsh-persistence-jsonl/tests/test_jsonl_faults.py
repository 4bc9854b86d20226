"""Fault injection against the JSONL backend: torn flushes of every size, damage, symlinks, SIGKILL, races."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh.persistence.jsonl import FLUSH_TYPE, HEADER_TYPE, JsonlPersistence
from dsh.session import PersistenceError, SessionEvent, SessionHeader, SessionLockedError, SessionStore
from dsh.testing import OTHER_UID, as_other_uid, needs_root


def _store(root: Path) -> tuple[JsonlPersistence, SessionStore]:
    backend = JsonlPersistence(root)
    return backend, SessionStore(lambda: backend)


def _flush(session: object, *events: tuple[str, dict[str, object]]) -> None:
    for type_, data in events:
        session.record(type_, **data)  # type: ignore[attr-defined]
    session.flush()  # type: ignore[attr-defined]


def _turn(n: int, pad: int = 0) -> list[tuple[str, dict[str, object]]]:
    return [
        ("turn/start", {"turn_id": f"t{n}"}),
        ("tool/call", {"call_id": f"c{n}", "pad": "x" * pad}),
        ("tool/result", {"call_id": f"c{n}"}),
        ("turn/end", {"turn_id": f"t{n}"}),
    ]


@pytest.mark.parametrize("torn", [1, 7, 4096, (1 << 20) + 5, "all-but-marker"])
def test_a_torn_flush_of_any_size_is_cut_back_to_the_last_complete_flush(tmp_path: Path, torn: int | str) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    _flush(session, *_turn(1))
    path = Path(backend.locate(session.header).path)
    kept = path.read_bytes()
    _flush(session, *_turn(2, pad=3 << 20))  # a 3 MiB flush
    whole = path.read_bytes()
    # A writer killed mid-append leaves any prefix of its flush: a half turn, complete lines included.
    cut = len(whole) - len(b"\n") - len(json.dumps({"type": FLUSH_TYPE, "events": 4}, separators=(",", ":")))
    cut = cut if torn == "all-but-marker" else len(kept) + int(torn)
    path.write_bytes(whole[:cut])

    loaded = backend.load(session.id)
    assert [e.data.get("turn_id") for e in loaded.events if e.type == "turn/start"] == ["t1"]
    assert len(loaded.events) == 4
    assert loaded.damage == (
        f"{path}: ignored an interrupted flush of {cut - len(kept)} bytes at the end (a write was cut short)",
    )
    resumed = store.resume(session.id, lock=True)
    assert resumed.new_turn_id() == f"{session.id}:turn-2"
    _flush(resumed, *_turn(3))
    after = path.read_bytes()
    assert after.startswith(kept), "the header and every complete flush are kept byte for byte"
    again = backend.load(session.id)
    assert again.damage == ()
    assert [e.data.get("turn_id") for e in again.events if e.type == "turn/start"] == ["t1", "t3"]


def test_a_damaged_header_is_reported_and_never_rewritten(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    _flush(session, *_turn(1))
    path = Path(backend.locate(session.header).path)
    for damaged, reason in (
        (b"", "complete session header"),
        (b'{"type":"session/header","header":{"id":"x"', "complete session header"),
        (b"garbage\n", "valid session header (it is not JSON)"),
        (b"{}\n\n", "valid session header (it is not a 'session/header' line)"),
        (b'{"type":"session/header","header":{"id":"x"}}\n', "valid session header (field 'cwd' is missing)"),
        (b'{"type":"turn/start","at":1,"data":{}}\n', "valid session header (it is not a 'session/header' line)"),
    ):
        path.write_bytes(damaged)
        with pytest.raises(PersistenceError) as info:
            backend.load(session.id)
        assert str(info.value).startswith(f"{path}: line 1 is not a {reason}"), str(info.value)
        assert info.value.session_id == session.id
        assert "\n" not in str(info.value)
        session.record("turn/start")
        with pytest.raises(PersistenceError, match=rf"^{path}: line 1"):
            session.flush()
        with pytest.raises(PersistenceError, match=rf"^{path}: line 1"):
            backend.acquire(session.header)
        session.pending.clear()
        assert path.read_bytes() == damaged
        scan = backend.scan()
        assert scan.headers == () and len(scan.damaged) == 1 and scan.damaged[0].startswith(f"{path}: line 1")


def test_a_header_of_another_session_is_refused_for_this_id(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    a, b = store.create(tmp_path), store.create(tmp_path)
    _flush(a, *_turn(1))
    _flush(b, *_turn(1))
    path_a = Path(backend.locate(a.header).path)
    os.replace(backend.locate(b.header).path, path_a)  # b's transcript under a's name
    with pytest.raises(PersistenceError, match=rf"^{path_a}: its header names session {b.id}, not {a.id}"):
        store.resume(a.id)
    with pytest.raises(PersistenceError, match=f"its header names session {b.id}"):
        backend.acquire(a.header)
    assert backend.scan().damaged == (f"{path_a}: its header names session {b.id}, not {a.id}; refusing it",)


def test_one_damaged_transcript_never_hides_the_others(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    good = store.create(tmp_path)
    _flush(good, *_turn(1))
    folder = Path(backend.locate(good.header).path).parent
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "garbage.jsonl").write_bytes(b"\x00\xff not json\n")
    (folder / "headerless.jsonl").write_bytes(b'{"type":"turn/start","at":1,"data":{}}\n')
    (folder / "dir.jsonl").mkdir()
    (folder / "link.jsonl").symlink_to(folder / f"{good.id}.jsonl")
    scan = backend.scan()
    assert [h.id for h in scan.headers] == [good.id]
    names = ("empty.jsonl", "garbage.jsonl", "headerless.jsonl", "dir.jsonl", "link.jsonl")
    reasons = {name: line for name in names for line in scan.damaged if line.startswith(f"{folder / name}")}
    assert set(reasons) == set(names) and len(scan.damaged) == len(names)
    assert "not a regular file" in reasons["dir.jsonl"]
    assert "symbolic link" in reasons["link.jsonl"]
    assert all("\n" not in line for line in scan.damaged)
    assert [h.id for h in backend.list()] == [good.id]


def test_nothing_is_written_through_a_symlink(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    _flush(session, *_turn(1))
    path = Path(backend.locate(session.header).path)
    target = tmp_path / "precious"
    target.write_bytes(b"keep me\n")
    # The transcript replaced by a symlink: appending, cutting and loading are all refused.
    path.unlink()
    path.symlink_to(target)
    session.record("turn/start")
    with pytest.raises(PersistenceError, match=rf"^{path} is a symbolic link; dsh never writes through one"):
        session.flush()
    with pytest.raises(PersistenceError, match="symbolic link"):
        backend.load(session.id)
    assert target.read_bytes() == b"keep me\n"
    # A lock file replaced by a symlink.
    fresh = store.create(tmp_path)
    lock = Path(backend.locate(fresh.header).path + ".lock")
    lock.symlink_to(target)
    with pytest.raises(PersistenceError, match=rf"^{lock} is a symbolic link"):
        fresh.acquire()
    # A symlink planted where a new transcript will be published is replaced, its target untouched.
    other = store.create(tmp_path)
    planted = Path(backend.locate(other.header).path)
    planted.symlink_to(target)
    other.record("turn/start")
    with pytest.raises(PersistenceError, match="symbolic link"):
        other.flush()
    assert target.read_bytes() == b"keep me\n"
    # Temporary names are unpredictable: a symlink at the old pid-based name is never used.
    last = store.create(tmp_path)
    guess = Path(f"{backend.locate(last.header).path}.{os.getpid()}.tmp")
    guess.symlink_to(target)
    _flush(last, *_turn(1))
    assert target.read_bytes() == b"keep me\n" and guess.is_symlink()
    assert [p.name for p in planted.parent.iterdir() if p.name.startswith(f".{last.id}")] == []


def test_a_symlinked_home_keeps_working(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "home").symlink_to(real)
    backend, store = _store(tmp_path / "home" / "sessions")
    session = store.create(tmp_path)
    _flush(session, *_turn(1))
    assert len(store.resume(session.id).history) == 4
    assert (real / "sessions").is_dir()


def test_a_file_from_before_flush_markers_loads_and_is_sealed(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    header = SessionHeader(id="old", cwd=str(tmp_path))
    path = Path(backend.locate(header).path)
    path.parent.mkdir(parents=True)
    lines = [{"type": HEADER_TYPE, "header": header.to_dict()}]
    lines += [{"type": "message/user", "at": 1.0, "data": {"text": str(i)}} for i in range(3)]
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines) + b'{"type":"mess')
    loaded = backend.load("old")
    assert [e.data["text"] for e in loaded.events] == ["0", "1", "2"]
    assert "ignored an interrupted flush of 13 bytes" in loaded.damage[0]
    resumed = store.resume("old", lock=True)
    _flush(resumed, ("message/user", {"text": "3"}))
    with path.open("ab") as fh:
        fh.write(b'{"type":"message/user","at":1.0,"data":{"text":"half"}}\n')  # a torn later flush
    again = backend.load("old")
    assert [e.data["text"] for e in again.events] == ["0", "1", "2", "3"]


# -- real processes -----------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import resource, signal, sys
    from dsh.persistence.jsonl import JsonlPersistence
    if len(sys.argv) > 4:
        # Die of SIGXFSZ the moment the file would grow past this size: killed at an exact byte.
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[4]), resource.RLIM_INFINITY))
    from dsh.session import SessionHeader, SessionEvent
    backend = JsonlPersistence(sys.argv[1])
    header = SessionHeader.from_json(sys.argv[2])
    n = int(sys.argv[3])
    sizes = [40, 300_000, 3, 1_600_000, 900]
    while True:
        count = 1 + n % 5
        pad = "x" * (sizes[n % len(sizes)] // count)
        backend.write(header, [SessionEvent(type="tool/call", data={"flush": n, "i": i, "of": count, "pad": pad})
                               for i in range(count)])
        print(n, flush=True)  # acknowledged: write() returned, so the flush is durable
        n += 1
    """
)


@pytest.mark.integration
def test_sigkill_at_random_points_loses_no_complete_flush(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    root = tmp_path / "root"
    backend, store = _store(root)
    header = store.create(tmp_path).header
    path = backend.locate(header).path
    next_flush, acknowledged, torn = 0, -1, 0
    for iteration in range(8):
        argv = [sys.executable, "-c", WRITER, str(root), header.to_json(), str(next_flush)]
        if iteration % 2:  # every other writer dies at a random byte of a future flush
            size = os.path.getsize(path) if os.path.exists(path) else 0
            argv.append(str(size + rng.randrange(1, 2_200_000)))
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            proc.wait(timeout=rng.uniform(0.25, 0.6) if iteration % 2 == 0 else 20)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        assert proc.returncode in (-signal.SIGKILL, -signal.SIGXFSZ), f"seed {seed}: writer ended {proc.returncode}"
        acks = [int(line) for line in out.split()]
        acknowledged = max([acknowledged, *acks])
        if not os.path.exists(path):
            continue
        loaded = backend.load(header.id)
        flushes: dict[int, list[int]] = {}
        for event in loaded.events:
            assert event.data["of"] == 1 + event.data["flush"] % 5, f"seed {seed}"
            flushes.setdefault(event.data["flush"], []).append(event.data["i"])
        # Whole flushes only, in order, with nothing acknowledged missing.
        assert list(flushes) == list(range(len(flushes))), f"seed {seed}"
        assert all(ids == list(range(1 + n % 5)) for n, ids in flushes.items()), f"seed {seed}"
        assert len(flushes) - 1 >= acknowledged, f"seed {seed}: acknowledged flush {acknowledged} lost"
        assert len(flushes) - 1 <= acknowledged + 1, f"seed {seed}"
        assert all("interrupted flush" in line for line in loaded.damage), f"seed {seed}"
        torn += bool(loaded.damage)
        next_flush = len(flushes)
    assert acknowledged >= 0, "the writer never completed a flush"
    assert torn >= 2, f"seed {seed}: only {torn} kills landed inside a flush; recovery was not exercised"
    # The next writer continues from a consistent transcript and loses nothing.
    before = len(backend.load(header.id).events)
    backend.write(header, [SessionEvent(type="turn/end")])
    after = backend.load(header.id)
    assert after.damage == () and len(after.events) == before + 1


RESUMER = textwrap.dedent(
    """
    import os, sys, time
    from dsh.persistence.jsonl import JsonlPersistence
    from dsh.session import SessionLockedError, SessionStore
    backend = JsonlPersistence(sys.argv[1])
    store = SessionStore(lambda: backend)
    print("ready", flush=True)
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.005)
    refused = 0
    while True:
        try:
            session = store.resume(sys.argv[2], lock=True)
        except SessionLockedError:
            refused += 1
            time.sleep(0.01)
            continue
        turn_id = session.new_turn_id()
        session.record("turn/start", turn_id=turn_id, pid=os.getpid())
        session.record("turn/end", turn_id=turn_id)
        session.flush()
        print(refused, flush=True)
        break
    """
)


@pytest.mark.integration
@pytest.mark.parametrize("writers", [2, 20])
def test_concurrent_resumers_are_serialised_with_unique_turn_ids(tmp_path: Path, writers: int) -> None:
    root = tmp_path / "root"
    backend, store = _store(root)
    session = store.create(tmp_path, lock=True)
    _flush(session, ("turn/start", {"turn_id": session.new_turn_id()}))
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", RESUMER, str(root), session.id, str(go)], stdout=subprocess.PIPE)
        for _ in range(writers)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    go.touch()
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    loaded = backend.load(session.id)
    starts = [e.data["turn_id"] for e in loaded.events if e.type == "turn/start"]
    assert len(starts) == writers + 1 and len(set(starts)) == len(starts)
    assert sorted(starts, key=lambda t: int(t.rsplit("-", 1)[1])) == [
        f"{session.id}:turn-{n}" for n in range(1, writers + 2)
    ]
    # Each turn's two events are adjacent: no interleaving.
    types = [e.type for e in loaded.events[1:]]
    assert types == ["turn/start", "turn/end"] * writers
    assert loaded.damage == ()


def test_a_lock_held_elsewhere_names_its_process(tmp_path: Path) -> None:
    root = tmp_path / "root"
    backend, store = _store(root)
    session = store.create(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom dsh.persistence.jsonl import JsonlPersistence\n"
            "from dsh.session import SessionHeader\n"
            "JsonlPersistence(sys.argv[1]).acquire(SessionHeader.from_json(sys.argv[2]))\n"
            "print('held', flush=True)\ntime.sleep(60)\n",
            str(root),
            session.header.to_json(),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = backend.locate(session.header).path + ".lock"
        with pytest.raises(SessionLockedError) as info:
            session.acquire()
        assert str(info.value) == (
            f"session {session.id} is being written by process {holder.pid} (lock {lock}); "
            "wait until that writer lets it go (a dsh exec when its turn ends; a dsh mcp connection, a dsh run "
            "or an open harness session when it closes) or use another session"
        )
    finally:
        holder.kill()
        holder.wait()
    session.acquire()  # the lock died with its holder
    session.release()


_BAD_LAYOUT = "line 1 is not a valid session header (its 'jsonl' layout marker must be a positive integer"


@pytest.mark.parametrize(
    ("marker", "reason"),
    [
        (99, "its layout 99 was written by a newer dsh-persistence-jsonl (this one reads up to 2); upgrade"),
        ('"2"', f"{_BAD_LAYOUT}, not '2')"),
        ("true", f"{_BAD_LAYOUT}, not True)"),
        (0, f"{_BAD_LAYOUT}, not 0)"),
    ],
)
def test_a_layout_marker_that_is_not_a_known_integer_is_refused(tmp_path: Path, marker: object, reason: str) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    _flush(session, *_turn(1))
    path = Path(backend.locate(session.header).path)
    head, rest = path.read_bytes().split(b"\n", 1)
    path.write_bytes(head.replace(b'"jsonl":2', f'"jsonl":{marker}'.encode()) + b"\n" + rest)
    damaged = path.read_bytes()
    with pytest.raises(PersistenceError) as info:
        backend.load(session.id)
    assert str(info.value).startswith(f"{path}: {reason}"), str(info.value)
    session.record("turn/start")
    with pytest.raises(PersistenceError):
        session.flush()
    assert path.read_bytes() == damaged, "never written over"


def test_a_fifo_under_a_session_name_is_refused_by_load_and_tail(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    _flush(session, *_turn(1))
    fifo = Path(backend.locate(session.header).path).with_name("ff.jsonl")
    os.mkfifo(fifo, 0o600)
    signal.alarm(10)  # a blocking open() would hang here: SIGALRM's default action fails the run
    try:
        for read in (backend.load, backend.tail, lambda sid: backend.load_file(str(fifo), sid)):
            with pytest.raises(PersistenceError, match=rf"^{fifo} is not a regular file; move it aside$"):
                read("ff")
        assert backend.scan().damaged == (f"{fifo} is not a regular file; move it aside",)
    finally:
        signal.alarm(0)


@needs_root
def test_a_root_another_user_made_outside_the_home_is_never_written(sticky_tmp: Path) -> None:
    root = sticky_tmp / "sessions"

    def plant() -> None:
        root.mkdir()
        root.chmod(0o777)  # to read every command's output and plant transcripts

    assert as_other_uid(plant) == 0
    backend, store = _store(root)
    with pytest.raises(PersistenceError) as err:
        store.create(sticky_tmp, lock=True)  # the lock makes and checks the folders
    assert str(err.value).startswith(
        f"refusing jsonl root {root}: it is owned by uid {OTHER_UID}, not by you (uid 0)"
    ), err.value
    assert list(root.iterdir()) == []


def test_a_root_or_session_folder_others_can_write_is_refused_with_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    backend, store = _store(root)
    session = store.create(tmp_path)
    _flush(session, ("tool/call", {"call_id": "c"}))
    folder = Path(backend.locate(session.header).path).parent
    for shared in (root, folder):
        shared.chmod(0o777)
        with pytest.raises(PersistenceError) as err:
            store.resume(session.id).acquire()
        what = "jsonl root" if shared == root else "session folder"
        assert str(err.value) == (
            f"refusing {what} {shared}: it is writable by group or others (mode 0777); run `chmod 700 {shared}`"
        )
        shared.chmod(0o700)
