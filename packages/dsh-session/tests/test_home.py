"""The deployment's home as a plugin reads it: one home, whatever a plugin's own setting says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh.core import Context, FiberState, Plugin
from dsh.session import DSH_HOME, plugin_home


def _homes(root: Context, configured: str | None) -> tuple[Any, list[Path]]:
    seen: list[Path] = []
    fiber = root.plugin(Plugin("reader", lambda ctx, _config: seen.append(plugin_home(ctx, configured))))
    return fiber, seen


def test_a_plugin_reads_the_deployments_home(tmp_path: Path) -> None:
    root = Context.root()
    root.provide(DSH_HOME, tmp_path / "home")
    fiber, seen = _homes(root, None)
    assert fiber.state is FiberState.ACTIVE and seen == [tmp_path / "home"]


def test_a_setting_that_resolves_to_the_same_home_is_accepted(tmp_path: Path) -> None:
    root = Context.root()
    root.provide(DSH_HOME, tmp_path / "home")
    fiber, seen = _homes(root, f"{tmp_path}/x/../home")
    assert fiber.state is FiberState.ACTIVE and seen == [tmp_path / "home"]


def test_a_different_home_fails_the_plugin_naming_both(tmp_path: Path) -> None:
    root = Context.root()
    root.provide(DSH_HOME, tmp_path / "home")
    fiber, seen = _homes(root, str(tmp_path / "other"))
    assert fiber.state is FiberState.FAILED and seen == []
    assert str(fiber.error) == (
        f"plugin 'reader': config.dsh_home resolves to {tmp_path / 'other'} but the deployment's home is "
        f"{tmp_path / 'home'}; configure one harness home"
    )


def test_without_a_deployment_the_setting_then_the_environment_decide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "env"))
    assert _homes(Context.root(), str(tmp_path / "own"))[1] == [tmp_path / "own"]
    assert _homes(Context.root(), "  ")[1] == [tmp_path / "env"]
