"""The system parts (Debian packages) some tests need, and what a test does when one is missing.

A test that needs one says so with ``@pytest.mark.system_parts("bubblewrap", ...)`` (or a module's
``pytestmark``). Before its fixtures run, a missing part skips it with a reason naming the Debian
package and the command that installs it; under ``CI=true`` the missing part fails it instead: CI
must never pass by skipping what it is there to test. The README's test command installs the parts
when it runs as root (``scripts/system_parts.py``); the table here is the one list of them.
"""

import glob
import os
import shutil
from collections.abc import Callable
from typing import NamedTuple

import pytest


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _on_path(name: str) -> Callable[[], bool]:
    return lambda: shutil.which(name) is not None


def _postgresql() -> bool:
    # PATH first, then Debian's versioned folders (as dsh.persistence.postgres.testing looks).
    if all(shutil.which(tool) for tool in ("initdb", "pg_ctl")):
        return True
    return any(
        _executable(os.path.join(folder, "initdb")) and _executable(os.path.join(folder, "pg_ctl"))
        for folder in glob.glob("/usr/lib/postgresql/*/bin")
    )


class SystemPart(NamedTuple):
    """One Debian package the tests use: what it gives them, and how to tell it is installed."""

    package: str
    gives: str
    present: Callable[[], bool]


SYSTEM_PARTS: dict[str, SystemPart] = {
    part.package: part
    for part in (
        SystemPart("bubblewrap", "bwrap: dsh-bash-sandbox's sandboxes, the test sshd's namespaces", _on_path("bwrap")),
        SystemPart(
            "openssh-server",
            "sshd (and ssh-keygen): dsh-bash-ssh's throw-away host on a loopback port",
            lambda: _executable("/usr/sbin/sshd") and shutil.which("ssh-keygen") is not None,
        ),
        SystemPart("postgresql", "initdb and pg_ctl: a throw-away server for the PostgreSQL backend", _postgresql),
        SystemPart("jq", "jq: the example hooks read their payload with it", _on_path("jq")),
    )
}
"""Every system part the tests use, by Debian package name."""


CI_FAILS = "(CI=true: a missing system part fails the run)"
"""Ends the failure message of a test whose part is missing under CI (the plugin reports it as FAILED)."""


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``), where a missing part fails instead of skipping."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing_parts(*packages: str) -> list[str]:
    """The Debian packages among ``packages`` (default: all of them) that are not installed here."""
    for package in packages:
        if package not in SYSTEM_PARTS:
            raise KeyError(f"unknown system part {package!r}; the known ones: {', '.join(SYSTEM_PARTS)}")
    return [p for p in packages or SYSTEM_PARTS if not SYSTEM_PARTS[p].present()]


def missing_reason(packages: list[str]) -> str:
    """One sentence: what is missing, what it gives the tests, and the command that installs it."""
    gives = "; ".join(SYSTEM_PARTS[p].gives for p in packages)
    return (
        f"needs the Debian package{'s' if len(packages) > 1 else ''} {', '.join(packages)} ({gives}), "
        f"not installed here: install with `sudo apt-get install {' '.join(packages)}`, or run the README's "
        "test command as root, which installs it"
    )


def require_parts(*packages: str) -> None:
    """Skip the running test when a part is missing (fail it under ``CI=true``)."""
    missing = missing_parts(*packages)
    if not missing:
        return
    reason = missing_reason(missing)
    if in_ci():
        pytest.fail(f"{reason} {CI_FAILS}", pytrace=False)
    pytest.skip(reason)
