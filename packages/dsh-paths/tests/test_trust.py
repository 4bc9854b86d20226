"""The one trust rule: private creation whatever the umask, and StrictModes-style checks."""

from __future__ import annotations

import itertools
import os
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.paths import (
    NotRegularFileError,
    UntrustedPathError,
    check_trusted,
    create_private_file,
    ensure_private_dir,
    open_trusted,
    read_trusted_text,
)
from dsh.testing import OTHER_UID, as_other_uid, fork_as_other_uid, needs_root


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
def test_directories_and_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    home = ensure_private_dir(tmp_path / "a" / "b" / "home", "DSH_HOME")
    assert [_mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", home)] == [0o700] * 3
    os.close(create_private_file(home / "f"))
    assert _mode(home / "f") == 0o600
    with pytest.raises(FileExistsError):
        create_private_file(home / "f")  # exclusive: never reuses a file someone put there
    (home / "link").symlink_to(home / "elsewhere")
    with pytest.raises(FileExistsError):
        create_private_file(home / "link")  # never through a symbolic link
    assert not (home / "elsewhere").exists()


def test_an_existing_directory_is_checked_not_changed(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UntrustedPathError) as caught:
        ensure_private_dir(shared, "DSH_HOME")
    assert str(caught.value) == (
        f"refusing DSH_HOME {shared}: it is writable by group or others (mode 0777); run `chmod 700 {shared}`"
    )
    assert _mode(shared) == 0o777
    os.chmod(shared, 0o755)
    ensure_private_dir(shared)  # readable by others is fine, as for OpenSSH


def test_group_writable_file_gets_the_file_fix(tmp_path: Path) -> None:
    path = tmp_path / "claude.json"
    path.write_text("{}")
    os.chmod(path, 0o664)
    with pytest.raises(UntrustedPathError, match=rf"mode 0664\); run `chmod 600 {path}`$"):
        check_trusted(path, "claude hooks file")


def test_a_symlinked_home_is_judged_by_its_target(tmp_path: Path) -> None:
    real = ensure_private_dir(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    check_trusted(tmp_path / "link", "DSH_HOME")


@needs_root
def test_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "theirs"
    path.mkdir(mode=0o700)
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(UntrustedPathError) as caught:
        check_trusted(path, "hooks directory")
    assert str(caught.value).startswith(f"refusing hooks directory {path}: it is owned by uid {OTHER_UID}, not by you")


def test_a_home_that_cannot_be_created_is_one_sentence_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(NotADirectoryError) as err:
        ensure_private_dir(blocker / "home", "DSH_HOME")
    # named at the component that is not a folder
    assert str(err.value) == (
        f"cannot create DSH_HOME {blocker / 'home'}: {blocker} is not a directory; move it aside or use another path"
    )


def test_a_folder_above_that_others_can_write_is_refused_unless_sticky(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    home = ensure_private_dir(shared / "home")
    shared.chmod(0o777)  # someone else could rename home away and put their own in its place
    with pytest.raises(UntrustedPathError) as err:
        check_trusted(home, "DSH_HOME")
    assert str(err.value) == (
        f"refusing DSH_HOME {home}: the folder {shared} above it is writable by group or others (mode 0777); "
        f"run `chmod go-w {shared}` or move it"
    )
    shared.chmod(0o1777)  # sticky, as /tmp: others cannot rename what is yours
    check_trusted(home, "DSH_HOME")


def test_a_symlink_into_a_folder_others_can_write_is_judged_by_where_it_leads(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "claude.json"
    target.write_text("{}")
    target.chmod(0o600)
    shared.chmod(0o777)
    hooks = ensure_private_dir(tmp_path / "home" / "hooks")
    (hooks / "claude.json").symlink_to(target)
    with pytest.raises(UntrustedPathError, match=f"the folder {shared} above it is writable by group or others"):
        check_trusted(hooks / "claude.json", "hooks file")


@needs_root
def test_a_symlink_someone_else_owns_is_refused_as_the_path_or_above_it(tmp_path: Path, sticky_tmp: Path) -> None:
    trusted = ensure_private_dir(tmp_path / "trusted")
    (trusted / "deployment.yaml").write_text("plugins: []\n")
    link = sticky_tmp / "home"
    assert as_other_uid(lambda: os.symlink(trusted, link)) == 0
    for call in (check_trusted, ensure_private_dir):
        with pytest.raises(UntrustedPathError) as err:
            call(link, "DSH_HOME")
        assert str(err.value) == (
            f"refusing DSH_HOME {link}: it is a symbolic link owned by uid {OTHER_UID}, not by you (uid 0) or "
            f"root, who can re-point it at any time; remove it (`rm {link}`) and use a path you own"
        )
    with pytest.raises(UntrustedPathError) as err:
        read_trusted_text(link / "deployment.yaml", "deployment file")
    assert str(err.value).startswith(
        f"refusing deployment file {link}/deployment.yaml: the symbolic link {link} on its way is owned by uid "
        f"{OTHER_UID}, not by you (uid 0) or root"
    )
    os.unlink(link)
    link.symlink_to(trusted)  # your own link in the same place is followed
    assert read_trusted_text(link / "deployment.yaml") == "plugins: []\n"


@needs_root
def test_a_home_flipped_between_trusted_and_theirs_is_never_read(tmp_path: Path, sticky_tmp: Path) -> None:
    # The attack of issue 21: another user flips the link that is root's home between a home that
    # passes every check and a folder of theirs; a check and a read by path could see the two.
    trusted = ensure_private_dir(tmp_path / "trusted")
    (trusted / "deployment.yaml").write_text("trusted\n")
    theirs = sticky_tmp / "theirs"
    link, spare = sticky_tmp / "home", sticky_tmp / "spare"

    def flip() -> None:
        theirs.mkdir()
        (theirs / "deployment.yaml").write_text("theirs\n")
        os.symlink(trusted, link)
        for n in itertools.count():  # until killed
            os.symlink(theirs if n % 2 else trusted, spare)
            os.rename(spare, link)

    pid = fork_as_other_uid(flip)
    read, refused = [], 0
    try:
        while not os.path.lexists(link):
            time.sleep(0.001)
        for _ in range(2000):
            try:
                read.append(read_trusted_text(link / "deployment.yaml", "deployment file"))
            except UntrustedPathError:
                refused += 1
            except FileNotFoundError:
                pass  # between the flips' rename steps
    finally:
        os.kill(pid, signal.SIGKILL)
        # Still flipping when killed: it did not fail on the way.
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == -signal.SIGKILL
    assert read == [] and refused > 0


def test_a_trusted_read_is_checked_on_what_it_opened(tmp_path: Path) -> None:
    home = ensure_private_dir(tmp_path / "home")
    fifo = home / "claude.json"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(NotRegularFileError, match=rf"^refusing hooks file {fifo}: it is a FIFO"):
        read_trusted_text(fifo, "hooks file")  # refused at once, never waiting for a writer
    fifo.unlink()
    fifo.write_text("{}")
    fifo.chmod(0o622)
    with pytest.raises(UntrustedPathError, match=r"writable by group or others \(mode 0622\)"):
        read_trusted_text(fifo, "hooks file")
    fifo.chmod(0o600)
    (home / "link").symlink_to(fifo)
    assert read_trusted_text(home / "link") == "{}"
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        open_trusted(home / "link", follow=False)
    with pytest.raises(FileNotFoundError):
        read_trusted_text(home / "missing")


def test_trust_fault_is_the_one_rule_on_owner_and_mode(tmp_path: Path) -> None:
    from dsh.paths import trust_fault

    path = tmp_path / "f"
    path.write_text("")
    for mode, fault in ((0o600, None), (0o644, None), (0o620, "mode"), (0o602, "mode"), (0o666, "mode")):
        path.chmod(mode)
        assert trust_fault(os.stat(path)) == fault, oct(mode)
    folder = tmp_path / "d"
    folder.mkdir()
    folder.chmod(0o1777)  # /tmp: a folder above a trusted path may be shared when sticky, never the path itself
    assert trust_fault(os.stat(folder), above=True) is None
    assert trust_fault(os.stat(folder)) == "mode"
    folder.chmod(0o777)
    assert trust_fault(os.stat(folder), above=True) == "mode"


def test_a_secret_may_not_be_read_by_group_or_others_either(tmp_path: Path) -> None:
    """A private key (bash-ssh's identity_file): any group or other bit is a fault, as OpenSSH judges it."""
    from dsh.paths import trust_fault

    key = tmp_path / "id_ed25519"
    key.write_text("")
    for mode, fault in ((0o600, None), (0o400, None), (0o640, "mode"), (0o604, "mode"), (0o601, "mode")):
        key.chmod(mode)
        assert trust_fault(os.stat(key), secret=True) == fault, oct(mode)
    key.chmod(0o644)
    assert trust_fault(os.stat(key)) is None  # readable by others is fine for what is not a secret


@needs_root
def test_trust_fault_allows_root_and_refuses_another_owner(tmp_path: Path) -> None:
    from dsh.paths import trust_fault

    path = tmp_path / "f"
    path.write_text("")
    path.chmod(0o600)
    os.chown(path, 0, 0)
    assert trust_fault(os.stat(path)) is None
    os.chown(path, OTHER_UID, OTHER_UID)
    assert trust_fault(os.stat(path)) == "owner"
