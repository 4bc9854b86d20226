"""Installed distributions written straight into a site directory, and the real ``dsh`` command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
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


def touch_dir(path: Path) -> None:
    """Move a directory's mtime forward, as an install does; coarse clocks may not show a fast one."""
    stamp = time.time_ns() + 10_000_000
    os.utime(path, ns=(stamp, stamp))


def remove_dist(info: Path, modules: tuple[str, ...] = ()) -> None:
    """Uninstall what :func:`make_dist` wrote."""
    shutil.rmtree(info)
    for module in modules:
        (info.parent / f"{module}.py").unlink(missing_ok=True)


def dsh(
    *args: str,
    home: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    python: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the real ``dsh`` command (``python -m dsh.cli``) with ``home`` as $DSH_HOME."""
    full_env = {**os.environ, "DSH_HOME": str(home), **(env or {})}
    # The interpreter's own bin comes first so a nested `dsh` resolves to this installation.
    full_env["PATH"] = f"{Path(python or sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
    return subprocess.run(
        [python or sys.executable, "-m", "dsh.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
