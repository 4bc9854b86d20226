"""Opening a file someone could replace: a FIFO, device or directory is refused at once, never waited on."""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.paths import NotRegularFileError, open_regular, read_regular_text


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """A blocking open() of a FIFO would hang the suite: SIGALRM turns it into a failure."""

    def hung(signum: int, frame: object) -> None:
        raise AssertionError("open() blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "hooks.json"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(NotRegularFileError) as info:
        read_regular_text(fifo, "hooks file")
    assert str(info.value) == f"refusing hooks file {fifo}: it is a FIFO, not a regular file; move it aside"
    assert info.value.strerror == "it is a FIFO, not a regular file" and info.value.path == str(fifo)
    assert isinstance(info.value, OSError)


def test_a_device_and_a_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NotRegularFileError, match=r"^refusing /dev/zero: it is a character device"):
        open_regular("/dev/zero")
    with pytest.raises(NotRegularFileError, match="it is a directory"):
        open_regular(tmp_path)


def test_a_regular_file_is_read_through_a_blocking_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("héllo")
    fd = open_regular(path)
    try:
        assert os.get_blocking(fd) and not os.get_inheritable(fd)
    finally:
        os.close(fd)
    assert read_regular_text(path) == "héllo"


def test_a_symlink_is_refused_when_not_followed(tmp_path: Path) -> None:
    (tmp_path / "target").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(OSError, match="link") as info:
        open_regular(tmp_path / "link", follow=False)
    assert info.value.errno == errno.ELOOP
    os.close(open_regular(tmp_path / "link"))
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")
