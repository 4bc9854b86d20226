"""Test helpers: distributions written straight into a site directory, and asyncio glue."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path


def make_dist(
    site: Path,
    name: str,
    version: str = "1.0",
    entry_points: Mapping[str, Mapping[str, str]] | None = None,
    modules: Mapping[str, str] | None = None,
) -> Path:
    """Write an installed distribution (``.dist-info`` plus modules) into ``site``, as pip would."""
    site.mkdir(parents=True, exist_ok=True)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, items in (entry_points or {}).items():
        lines.append(f"[{group}]")
        lines.extend(f"{k} = {v}" for k, v in items.items())
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(source)
    return info


def remove_dist(info: Path, modules: tuple[str, ...] = ()) -> None:
    """Uninstall what :func:`make_dist` wrote."""
    shutil.rmtree(info)
    for module in modules:
        (info.parent / f"{module}.py").unlink(missing_ok=True)
