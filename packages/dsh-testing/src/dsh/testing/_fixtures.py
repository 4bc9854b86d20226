"""The pytest plugin every dsh test run gets (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._parts import CI_FAILS, require_parts

_MANAGED_PREFIX = "DSH_"
"""The managed namespace (``dsh.bash.DSH_ENV_PREFIX``), matched in any letter case as dsh does.

Spelled here because this utility depends on no dsh distribution: a test of ``dsh-paths`` must run
with nothing else installed. ``tests/test_workspace.py`` checks the two agree.
"""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "system_parts(*packages): the Debian packages the test needs (dsh.testing.SYSTEM_PARTS); a missing one "
        "skips it naming the package and its install command, or fails it under CI=true",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture starts a server that needs it: a missing system part skips (or, in CI, fails)."""
    for mark in item.iter_markers("system_parts"):
        require_parts(*mark.args)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A missing system part under CI=true is the test's failure (FAILED), not an error of its set-up
    (the marker's check, or a fixture such as ``postgres_server`` that needs the part)."""
    outcome = yield
    failed = call.excinfo
    if call.when != "setup" or failed is None or not failed.errisinstance(pytest.fail.Exception):
        return
    if str(failed.value).endswith(CI_FAILS):
        report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
        report.when = "call"


@pytest.fixture(autouse=True)
def _no_ambient_dsh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start without the developer's own DSH_* variables (a test may add its own)."""
    for key in list(os.environ):
        if key[: len(_MANAGED_PREFIX)].upper() == _MANAGED_PREFIX:
            monkeypatch.delenv(key)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A new directory at the front of ``sys.path`` to install distributions into (``make_dist``).

    Modules imported from it are forgotten afterwards, so the next test imports its own afresh.
    """
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    yield path
    inside = str(path) + os.sep
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(inside):
            del sys.modules[name]


@pytest.fixture
def sticky_tmp() -> Iterator[Path]:
    """A fresh folder like ``/tmp`` (root's, mode 1777) that a second uid can reach and write."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="dsh-sticky-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One throw-away PostgreSQL server for the whole run (see ``dsh.persistence.postgres.testing``).

    Skips, naming PostgreSQL and the reason, when none can be started here.
    """
    try:
        from dsh.persistence.postgres.testing import ServerUnavailable, TemporaryServer
    except ImportError as exc:  # pragma: no cover - the distribution or psycopg is not installed
        pytest.skip(f"PostgreSQL backend not installed: {exc}")
    require_parts("postgresql")
    server = TemporaryServer()
    try:
        server.setup()
    except ServerUnavailable as exc:
        server.cleanup()
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def pg_schema(postgres_server: Any, request: pytest.FixtureRequest) -> str:
    """A schema name no other test uses, so tests on the shared server never see each other's sessions."""
    return f"t_{secrets.token_hex(6)}"
