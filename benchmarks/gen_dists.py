"""Generate N installed-looking distributions into a site directory, for discovery benchmarks.

Each gets a ``.dist-info`` with METADATA, RECORD and an ``entry_points.txt`` in groups that are not
dsh's (``console_scripts`` and a private group), like the unrelated packages of a big environment.

    python benchmarks/gen_dists.py SITE_DIR N
"""

from __future__ import annotations

import sys
from pathlib import Path


def generate(site: Path, count: int) -> Path:
    """Write ``count`` distributions into ``site`` (created if missing) and return it."""
    site.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        name = f"bench_dist_{n:04d}"
        info = site / f"{name}-1.{n}.0.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: bench-dist-{n:04d}\nVersion: 1.{n}.0\nSummary: benchmark filler\n"
        )
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n")
        (info / "entry_points.txt").write_text(
            f"[console_scripts]\nbench-{n} = {name}:main\n\n[bench.private]\nitem = {name}:item\n"
        )
    return site


if __name__ == "__main__":
    generate(Path(sys.argv[1]), int(sys.argv[2]))
