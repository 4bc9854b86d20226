"""``import dsh.hooks`` stays cheap: every cold ``dsh`` command looks the hooks service up."""

from __future__ import annotations

import json
import subprocess
import sys

# Not dsh.session: the plugin reads the deployment's home key from it, and every deployment's loader
# stands on it anyway. Not dsh.agent (nor dsh.bash below it): the service key is the loop's seam, and a
# host that looks hooks up runs the loop.
HEAVY = ["asyncio", "pydantic", "yaml", "dsh.hooks._service", "dsh.hooks._load"]


def _loaded_after(code: str, extra: list[str] | None = None) -> list[str]:
    watched = [*HEAVY, *(extra or [])]
    probe = f"import json, sys\n{code}\nprint(json.dumps([m for m in {watched!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def test_looking_the_service_up_loads_only_its_key() -> None:
    assert "dsh.hooks._runner" not in _loaded_after("from dsh.hooks import HOOKS", extra=["dsh.hooks._runner"])


def test_the_package_and_its_plugin_import_without_the_runner() -> None:
    assert _loaded_after("import dsh.hooks\nfrom dsh.hooks import HOOKS, HooksConfig, plugin") == []


def test_the_verdict_types_import_without_the_runner() -> None:
    assert _loaded_after("from dsh.hooks import HookOutcome, HookReport, HookScope, Notice, HookConfigError") == []


def test_naming_the_runner_loads_it() -> None:
    assert "dsh.hooks._service" in _loaded_after("from dsh.hooks import HookRunner")


def test_every_export_resolves() -> None:
    import dsh.hooks

    assert sorted(dsh.hooks.__all__) == sorted(set(dsh.hooks.__all__))
    for name in dsh.hooks.__all__:
        assert getattr(dsh.hooks, name) is not None, name
