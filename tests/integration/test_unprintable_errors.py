"""A plugin raising an exception whose ``str()`` itself raises: the loader still names that exception."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh.bash_env import BASH_ENV_GROUP
from dsh.core import FiberState
from tests.helpers import harness, make_dist

pytestmark = pytest.mark.integration

UNPRINTABLE = """
class {name}({base}):
    def __str__(self):
        raise RuntimeError("str broken")

raise {name}()
"""

MODULES = ("unprintable_base", "unprintable_error")


def test_an_unprintable_exception_at_import_fails_only_that_plugin_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    make_dist(
        site,
        "dsh-unprintable",
        "1.0",
        {BASH_ENV_GROUP: {"base": "unprintable_base:contributor", "error": "unprintable_error:contributor"}},
        {
            "unprintable_base": UNPRINTABLE.format(name="Halt", base="BaseException"),
            "unprintable_error": UNPRINTABLE.format(name="Broken", base="Exception"),
        },
    )
    monkeypatch.syspath_prepend(str(site))
    try:
        runtime = harness(tmp_path, plugins=[{"id": "bash-env", "name": "bash-env"}])
        try:
            states = {f.label: f.state for f in runtime.fibers() if f.label.startswith("bash-env:")}
            assert states == {"bash-env:base": FiberState.FAILED, "bash-env:error": FiberState.FAILED}
            warnings = runtime.warnings()
            for name, module, kind in (("base", "unprintable_base", "Halt"), ("error", "unprintable_error", "Broken")):
                assert (
                    f"plugin 'bash-env:{name}' (from dsh-unprintable 1.0) failed: entry point '{name}' in group "
                    f"'dsh.bash_env' ({module}:contributor, from dsh-unprintable 1.0) failed to load: "
                    f"{kind} (its message could not be read: RuntimeError: str broken)"
                ) in warnings, warnings
        finally:
            runtime.close()
    finally:
        for module in MODULES:
            sys.modules.pop(module, None)
