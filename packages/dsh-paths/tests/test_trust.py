"""The one trust rule: private creation whatever the umask, and StrictModes-style checks."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.paths import UntrustedPathError, check_trusted, create_private_file, ensure_private_dir

OTHER_UID = 65534


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


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file owned by a second uid (os.chown)")
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
    assert str(err.value) == f"cannot create DSH_HOME {blocker / 'home'}: Not a directory at {blocker / 'home'}"


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
