"""An exit status dsh did not read is never reported as success, and no call leaves a zombie or a pipe behind."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from dsh.bash import BashExecRequest, ExecError, ExecResult, LocalExecutor
from dsh.bash._supervisor import ensure as ensure_supervisor

NOTE = "dsh: the exit status of this command is unknown: another waitpid() in this process reaped the shell first"


def _reap_every_child(signum: int, frame: FrameType | None) -> None:
    """What a reap-everything child watcher (asyncio's FastChildWatcher, many daemons) does."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


@pytest.fixture(params=["sigchld-handler-reaps-all", "sigchld-ignored"])
def other_reaper(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = signal.signal(
        signal.SIGCHLD, _reap_every_child if request.param == "sigchld-handler-reaps-all" else signal.SIG_IGN
    )
    try:
        yield request.param
    finally:
        signal.signal(signal.SIGCHLD, previous)


def _run_async(executor: LocalExecutor, request: BashExecRequest) -> ExecResult:
    return asyncio.run(executor.run(request))


def _run_sync(executor: LocalExecutor, request: BashExecRequest) -> ExecResult:
    return executor.run_sync(request)


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "no-pidfd"])
@pytest.mark.parametrize("run", [_run_async, _run_sync], ids=["run", "run_sync"])
@pytest.mark.parametrize(("command", "own_status"), [("exit 2", 2), ("kill -9 $$", 137)])
def test_a_status_another_waitpid_took_is_255_with_a_note_never_success(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    other_reaper: str,
    run: Callable[[LocalExecutor, BashExecRequest], ExecResult],
    command: str,
    own_status: int,
    pidfd: bool,
) -> None:
    if not pidfd:  # kernels before Linux 5.3: waitpid() on the pid, from a thread under asyncio
        monkeypatch.delattr(os, "pidfd_open")
    # A blocking hook prints why and exits 2: reporting 0 would let the tool call through.
    result = run(LocalExecutor(spill_dir=tmp_path), BashExecRequest(command=f"echo out; echo blocked >&2; {command}"))
    assert result.stdout == "out\n"
    assert result.stderr.startswith("blocked\n")
    if other_reaper == "sigchld-ignored":  # the kernel discards every status: dsh never sees one
        assert result.exit_code == 255
    else:  # a race: whoever reaps first has the status
        assert result.exit_code in (own_status, 255)
    if result.exit_code == 255:
        assert result.stderr.startswith(f"blocked\n{NOTE}")
        assert result.stderr.endswith("SIG_DFL\n")
        assert result.stderr.count("\n") == 2
        assert not result.status_known  # what a hook runner reads to refuse rather than allow
    else:
        assert result.stderr == "blocked\n"
        assert result.status_known


def _children() -> set[int]:
    """Our child processes in any state, zombies included."""
    me = os.getpid()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(stat[1]) == me:
                found.add(int(entry))
    return found


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class _NoFdWatching(asyncio.SelectorEventLoop):
    """A loop that cannot watch file descriptors, as one that is not selector-based."""

    def add_reader(self, *args: object) -> None:
        raise NotImplementedError

    def remove_reader(self, fd: object) -> bool:
        raise NotImplementedError

    def add_writer(self, *args: object) -> None:
        raise NotImplementedError

    def remove_writer(self, fd: object) -> bool:
        raise NotImplementedError


@pytest.mark.parametrize("stdin", [None, "input"])
def test_a_loop_without_add_reader_is_a_clear_error_and_leaves_no_zombie_or_fd(
    tmp_path: Path, stdin: str | None
) -> None:
    executor = LocalExecutor(spill_dir=tmp_path)
    loop = _NoFdWatching()
    ensure_supervisor()  # this process's one supervisor (and its pipe) is no leak of the call
    try:
        children, fds = _children(), _fds()
        with pytest.raises(ExecError) as caught:
            loop.run_until_complete(executor.run(BashExecRequest(command="sleep 30", stdin=stdin)))
        assert "_NoFdWatching" in str(caught.value)
        assert "needs a selector event loop or uvloop (loop.add_reader); use run_sync()" in str(caught.value)
        assert _children() == children  # killed and reaped: not even a zombie
        assert _fds() == fds  # both pipes (and stdin's) closed
    finally:
        loop.close()


def test_a_second_cancel_during_the_kill_leaves_no_zombie(tmp_path: Path) -> None:
    executor = LocalExecutor(spill_dir=tmp_path)

    async def scenario() -> None:
        task = asyncio.ensure_future(executor.run(BashExecRequest(command="trap '' TERM; echo x; sleep 30")))
        await asyncio.sleep(0.1)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()  # while the first cancel's kill-and-drain runs: the shell is killed, not yet reaped
        with pytest.raises(asyncio.CancelledError):
            await task

    ensure_supervisor()
    children = _children()
    for _ in range(3):
        asyncio.run(scenario())
        deadline = time.monotonic() + 1
        while _children() - children and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _children() - children, "the cancelled shell was left unreaped"


@pytest.mark.parametrize("run", [_run_async, _run_sync], ids=["run", "run_sync"])
def test_a_commands_own_255_is_known_and_has_no_note(
    tmp_path: Path, run: Callable[[LocalExecutor, BashExecRequest], ExecResult]
) -> None:
    result = run(LocalExecutor(spill_dir=tmp_path), BashExecRequest(command="exit 255"))
    assert (result.exit_code, result.stderr, result.status_known) == (255, "", True)
