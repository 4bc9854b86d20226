from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh.persistence.jsonl import FLUSH_TYPE, HEADER_TYPE, LAYOUT, JsonlPersistence, escape_cwd, session_path
from dsh.session import SessionHeader, SessionLockedError, SessionStore


def _store(root: Path) -> tuple[JsonlPersistence, SessionStore]:
    backend = JsonlPersistence(root)
    return backend, SessionStore(lambda: backend)


@settings(max_examples=300)
@given(st.text(min_size=0, max_size=400))
def test_every_cwd_maps_to_one_directory_inside_the_root(cwd: str) -> None:
    root = "/srv/dsh/sessions"
    name = escape_cwd("/" + cwd)
    assert "/" not in name and "\x00" not in name
    assert name not in ("", ".", "..") and not name.startswith(".")
    assert len(name) <= 150
    path = os.path.normpath(os.path.join(root, name, "id.jsonl"))
    assert os.path.dirname(os.path.dirname(path)) == root


@pytest.mark.parametrize("cwd", ["/a/../../etc", "/with space/ünïcode", "/" + "x" * 300, "/..", "/a%2Fb"])
def test_hostile_cwds_are_escaped(cwd: str, tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create()
    header = session.header.replace(cwd=cwd)
    location = backend.locate(header)
    assert Path(location.path).resolve().is_relative_to((tmp_path / "root").resolve())
    assert escape_cwd("/a%2Fb") != escape_cwd("/a/b")


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "", ".."])
def test_locate_validates_the_id_before_building_a_path(tmp_path: Path, bad_id: str) -> None:
    """A header built without validation still never yields a path outside the root."""
    from dsh.session import InvalidSessionIdError

    backend, _ = _store(tmp_path / "root")
    # ``_replace`` (a NamedTuple's) builds a header without checking it: a bad id can reach locate() that way.
    header = SessionHeader(id="ok-1", cwd="/work")._replace(id=bad_id)
    assert header.id == bad_id
    with pytest.raises(InvalidSessionIdError):
        backend.locate(header)
    assert session_path(backend.root, "/work", "ok-1") == backend.locate(SessionHeader(id="ok-1", cwd="/work")).path


def test_first_flush_publishes_header_with_batch_and_modes(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    session.record("turn/start")
    session.record("turn/end")
    session.flush()
    path = Path(backend.locate(session.header).path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {
        "type": HEADER_TYPE,
        "header": session.header.to_dict(),
        "jsonl": LAYOUT,
    }
    assert [json.loads(line) for line in lines[1:]][-1] == {"type": FLUSH_TYPE, "events": 2}
    assert [json.loads(line)["type"] for line in lines[1:]] == ["turn/start", "turn/end", FLUSH_TYPE]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "root").stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_torn_last_line_is_reported_and_next_flush_continues(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    session.record("message/user", text="one")
    session.flush()
    path = Path(backend.locate(session.header).path)
    with path.open("ab") as fh:
        fh.write(b'{"type":"message/user","da')  # a crash mid-append
    backend.close()

    backend2, store2 = _store(tmp_path / "root")
    resumed = store2.resume(session.id)
    assert [e.data.get("text") for e in resumed.history] == ["one"]
    assert len(resumed.damage) == 1 and "ignored an interrupted flush of 26 bytes" in resumed.damage[0]
    resumed.record("message/user", text="two")
    resumed.flush()
    again = store2.resume(session.id)
    assert [e.data.get("text") for e in again.history] == ["one", "two"]
    assert again.damage == ()


def test_corrupt_middle_line_is_skipped_and_reported(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    for text in ("a", "b"):
        session.record("message/user", text=text)
        session.flush()
    path = Path(backend.locate(session.header).path)
    lines = path.read_bytes().split(b"\n")
    lines.insert(2, b"not json")
    path.write_bytes(b"\n".join(lines))
    loaded = backend.load(session.id)
    assert [e.data["text"] for e in loaded.events] == ["a", "b"]
    assert loaded.damage == (f"{path}: skipped corrupt line 3: JSONDecodeError",)
    # Damage inside a complete flush is reported, never cut: the next flush appends after it.
    session.record("message/user", text="c")
    session.flush()
    assert b"\nnot json\n" in path.read_bytes()
    assert [e.data["text"] for e in backend.load(session.id).events] == ["a", "b", "c"]


WRITER = textwrap.dedent(
    """
    import sys, time
    from dsh.persistence.jsonl import JsonlPersistence
    from dsh.session import SessionHeader, SessionEvent
    backend = JsonlPersistence(sys.argv[1])
    header = SessionHeader.from_json(sys.argv[2])
    mode = sys.argv[3]
    backend.write(header, [SessionEvent(type="turn/start")])
    if mode == "hold":
        backend.acquire(header)
    print("locked", flush=True)
    if mode == "hold":
        time.sleep(60)
    big = "x" * 200_000
    i = 0
    while True:
        backend.write(header, [SessionEvent(type="message/user", data={"i": i, "pad": big}) for _ in range(20)])
        i += 1
    """
)


def _spawn_writer(root: Path, header: SessionHeader, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), header.to_json(), mode], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.integration
def test_second_process_gets_a_clear_lock_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    backend, store = _store(root)
    session = store.create(tmp_path)
    proc = _spawn_writer(root, session.header, "hold")
    try:
        session.record("turn/start")
        with pytest.raises(
            SessionLockedError, match=rf"session {session.id} is being written by process {proc.pid} \(lock "
        ) as err:
            session.flush()
        assert err.value.session_id == session.id
    finally:
        proc.kill()
        proc.wait()
    lines = Path(backend.locate(session.header).path).read_text().splitlines()
    assert len(lines) == 3, "nothing from the refused writer was interleaved"
    session.flush()  # the lock died with its holder
    assert len(backend.load(session.id).events) == 2


def test_unserialisable_event_is_a_clear_error(tmp_path: Path) -> None:
    from dsh.session import PersistenceError, SessionEvent

    backend = JsonlPersistence(tmp_path / "root")
    with pytest.raises(PersistenceError, match="event 'x' of session s cannot be stored as JSON"):
        backend.write(SessionHeader(id="s", cwd="/w"), [SessionEvent(type="x", data={"bad": object()})])


def test_resume_reads_only_the_tail_and_continues_the_turn_numbers(tmp_path: Path) -> None:
    backend, store = _store(tmp_path / "root")
    session = store.create(tmp_path)
    for _ in range(3):
        session.acquire()
        turn_id = session.new_turn_id()
        session.record("turn/start", turn_id=turn_id)
        session.record("tool/call", call_id="c")
        session.record("turn/end", turn_id=turn_id)
        session.flush()
    path = Path(backend.locate(session.header).path)
    # A torn flush after the last marker is not part of the tail either.
    with path.open("ab") as fh:
        fh.write(b'{"type":"turn/start","at":0,"data":{"turn_id":"x:turn-99"}}\n')
    tail = backend.tail(session.id)
    assert tail is not None and tail.header == session.header and tail.last_turn == 3
    resumed = store.resume(session.id, lock=True, history=False)
    assert resumed.new_turn_id() == f"{session.id}:turn-4" and resumed.turns == 3
    # The history is still there, read when asked for.
    assert [e.type for e in resumed.history].count("turn/start") == 3 and resumed.damage
    resumed.release()


@pytest.mark.parametrize("count", [3, 70], ids=["few", "many"])
def test_a_listing_reads_every_header_in_order_and_names_a_damaged_one(tmp_path: Path, count: int) -> None:
    backend = JsonlPersistence(tmp_path)
    written = [
        SessionHeader(id=f"s{i:03d}", cwd=f"/w/{i % 4}", created_at=f"2026-01-01T00:00:{i % 60:02d}+00:00")
        for i in range(count)
    ]
    for header in written:
        backend.write(header, [])
    broken = Path(session_path(str(tmp_path), "/w/0", "s000"))
    broken.write_bytes(b'{"type":"session/header","header":{"id":"s000","cwd":"/w/0"},"jsonl":NaN}\n')
    scan = backend.scan()
    assert [h.id for h in scan.headers] == [h.id for h in sorted(written[1:], key=lambda h: (h.created_at, h.id))]
    assert len(scan.damaged) == 1 and "line 1 is not a valid session header (it is not JSON)" in scan.damaged[0]


def test_a_record_torn_by_a_kill_is_left_out_and_cut_before_the_next_one(tmp_path: Path) -> None:
    from dsh.session import SessionEvent

    backend, store = _store(tmp_path / "root")
    session = store.create(str(tmp_path), lock=True)

    def began(call_id: str) -> SessionEvent:
        return SessionEvent(type="tool/began", data={"call_id": call_id, "name": "bash", "arguments": {}})

    backend.begin(session.header, began("c1"))
    path = Path(backend.locate(session.header).path + ".began")  # type: ignore[union-attr]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    whole = path.read_bytes()
    with path.open("ab") as torn:  # a second record cut short by SIGKILL: no flush marker
        torn.write(b'{"type": "tool/began", "at": 1.0, "data": {"call_id": "c2"')
    found = backend.unsettled(session.id)
    assert found is not None and [e.data["call_id"] for e in found.events] == ["c1"]
    backend.begin(session.header, began("c3"))
    assert path.read_bytes().startswith(whole) and b'"c2"' not in path.read_bytes()
    found = backend.unsettled(session.id)
    assert found is not None and [e.data["call_id"] for e in found.events] == ["c1", "c3"]
    session.release()


@pytest.mark.parametrize("left", [b"", b'{"type":"session/header","header":{"id":'], ids=["empty", "header cut short"])
def test_a_began_file_whose_first_write_is_not_whole_holds_no_record(tmp_path: Path, left: bytes) -> None:
    """What a reader without the lock sees while the writer's first record is being written (or a kill left)."""
    from dsh.session import SessionEvent

    backend, store = _store(tmp_path / "root")
    session = store.create(str(tmp_path), lock=True)
    backend.write(session.header, [SessionEvent(type="turn/start")])
    began = Path(backend.locate(session.header).path + ".began")  # type: ignore[union-attr]
    began.write_bytes(left)
    began.chmod(0o600)
    assert backend.unsettled(session.id) is None
    session.release()
    resumed = store.resume(session.id, lock=True, history=False)  # what a second `dsh exec --session` does
    record = SessionEvent(type="tool/began", data={"call_id": "c1", "name": "bash", "arguments": {}})
    backend.begin(resumed.header, record)
    found = backend.unsettled(session.id)
    assert found is not None and found.header.id == session.id and [e.data["call_id"] for e in found.events] == ["c1"]
    resumed.release()


def test_a_reader_without_the_lock_never_fails_on_the_began_file_coming_and_going(tmp_path: Path) -> None:
    """The lock holder makes the ``.began`` file (begin) and removes it (the flush that folds it in) while
    another process reads it: every read sees a whole record, or none; none fails on a file that came or
    went between two looks (what 20 concurrent `dsh exec --session` showed about one run in 20)."""
    import threading

    from dsh.session import SessionEvent

    backend, store = _store(tmp_path / "root")
    session = store.create(str(tmp_path), lock=True)
    backend.write(session.header, [SessionEvent(type="turn/start")])
    reader = JsonlPersistence(tmp_path / "root")
    failures: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                found = reader.unsettled(session.id)
            except BaseException as exc:  # every failure is the finding
                failures.append(exc)
                return
            assert found is None or [e.type for e in found.events] == ["tool/began"]

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for n in range(300):
            record = SessionEvent(type="tool/began", data={"call_id": f"c{n}", "name": "bash", "arguments": {}})
            backend.begin(session.header, record)
            backend.write(session.header, [SessionEvent(type="turn/end")])
    finally:
        done.set()
        for thread in readers:
            thread.join()
    session.release()
    assert failures == []


def test_a_damaged_began_header_is_still_refused(tmp_path: Path) -> None:
    from dsh.session import PersistenceError

    backend, store = _store(tmp_path / "root")
    session = store.create(str(tmp_path), lock=True)
    began = Path(backend.locate(session.header).path + ".began")  # type: ignore[union-attr]
    began.parent.mkdir(parents=True, exist_ok=True)
    began.write_bytes(b"garbage\n")
    began.chmod(0o600)
    with pytest.raises(PersistenceError, match="not a valid session header"):
        backend.unsettled(session.id)
    session.release()


def test_a_kill_between_the_fold_and_the_removal_never_folds_a_record_twice(tmp_path: Path) -> None:
    from dsh.session import SessionEvent

    backend, store = _store(tmp_path / "root")
    session = store.create(str(tmp_path), lock=True)
    record = SessionEvent(type="tool/began", data={"call_id": "c1", "name": "bash", "arguments": {}})
    backend.begin(session.header, record)
    began = Path(backend.locate(session.header).path + ".began")  # type: ignore[union-attr]
    left = began.read_bytes()
    backend.write(session.header, [SessionEvent(type="turn/start")])  # folds c1 in, then removes the file
    assert not began.exists()
    began.write_bytes(left)  # as a kill after the fold's fsync, before the removal, leaves it
    began.chmod(0o600)
    assert backend.unsettled(session.id) is None
    backend.write(session.header, [SessionEvent(type="turn/end")])
    assert [e.type for e in backend.load(session.id).events] == ["tool/began", "turn/start", "turn/end"]
    assert not began.exists()
    session.release()


def test_a_jsonl_session_is_opened_on_an_event_loop_s_own_thread(tmp_path: Path) -> None:
    """Its lock is refused at once when held and its files are local: ``dsh serve`` opens it without a thread."""
    from dsh.session.persistence import acquire_waits

    assert acquire_waits(JsonlPersistence(tmp_path)) is False
    assert acquire_waits(object()) is True  # type: ignore[arg-type]  # a backend that does not say: it may wait


def test_a_began_file_a_killed_writer_left_gets_its_folder_synced_before_the_next_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer killed between the file's sync and its folder's leaves records whose name may not be
    durable: the next holder's first record syncs the folder too; its second, in the same hold, does not."""
    from dsh.session import SessionEvent

    def record(call_id: str) -> SessionEvent:
        return SessionEvent(type="tool/began", data={"call_id": call_id, "name": "bash", "arguments": {}})

    killed, store = _store(tmp_path / "root")
    session = store.create(str(tmp_path), lock=True)
    killed.begin(session.header, record("c1"))
    session.release()  # its process died: no flush, the lock gone with it

    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    backend, store = _store(tmp_path / "root")
    resumed = store.resume(session.id, lock=True, history=False)
    backend.begin(resumed.header, record("c2"))
    assert synced == ["file", "folder"]
    backend.begin(resumed.header, record("c3"))
    assert synced == ["file", "folder", "file"]
    resumed.release()
    found = backend.unsettled(session.id)
    assert found is not None and [e.data["call_id"] for e in found.events] == ["c1", "c2", "c3"]
