"""``import dsh.hooks`` stays free of what only a running hook needs: every cold ``dsh`` command
loads the hooks plugin, and a hook file with nothing for the turn's events must not cost asyncio."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["asyncio", "concurrent.futures", "pydantic", "yaml"]
"""asyncio loads when a hook runs (hook commands run concurrently), pydantic and yaml never here."""


def _loaded_after(code: str) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def test_the_package_its_plugin_and_its_runner_import_without_asyncio() -> None:
    assert _loaded_after("import dsh.hooks\nfrom dsh.hooks import HOOKS, Hooks, HooksConfig, plugin") == []
    assert _loaded_after("from dsh.hooks.runner import HookOutcome, HookReport, HookRunner") == []


def test_the_package_and_its_plugin_leave_the_runner_s_machinery_to_the_runner() -> None:
    """The plugin builds the runner only once a table holds a hook (``dsh.hooks._hooks``), so what
    runs a hook is not imported by the package that every ``dsh`` command loads."""
    code = (
        "import json, sys\nimport dsh.hooks, dsh.hooks._claude, dsh.hooks._codex\n"
        "print(json.dumps(sorted(m for m in sys.modules if m in MACHINERY)))"
    ).replace("MACHINERY", repr(RUNNER_MACHINERY))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


RUNNER_MACHINERY = (
    "dsh.hooks._service",
    "dsh.hooks._process",
    "dsh.hooks._payload",
    "dsh.hooks._decision",
    "dsh.hooks._outcome",
    "dsh.hooks._envfile",
    "dsh.hooks._select",
)


def test_every_export_is_the_package_s_own_attribute() -> None:
    import dsh.hooks

    assert sorted(dsh.hooks.__all__) == sorted(set(dsh.hooks.__all__))
    for name in dsh.hooks.__all__:
        assert name in vars(dsh.hooks), name
