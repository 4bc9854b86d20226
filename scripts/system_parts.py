"""The system parts the tests use (``dsh.testing.SYSTEM_PARTS``): installed with apt when this runs as root.

    python scripts/system_parts.py      # hatch run test's first step

As root on a machine with ``apt-get`` (CI, a container), the missing Debian packages are installed:
PostgreSQL without a default cluster, and no package's daemon started (``policy-rc.d``), because the
tests start their own throw-away servers. Otherwise nothing is installed; each missing part is named
with the command that installs it, and the tests that need it skip saying so (under ``CI=true`` they
fail instead). Exit status 0 either way: the tests, not this step, decide the run's outcome.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from dsh.testing import SYSTEM_PARTS, in_ci, missing_parts

POLICY = Path("/usr/sbin/policy-rc.d")


def install(packages: list[str]) -> bool:
    """``apt-get install`` the packages, starting no daemon and making no PostgreSQL cluster."""
    conf = Path("/etc/postgresql-common/createcluster.conf")
    conf.parent.mkdir(parents=True, exist_ok=True)
    if not conf.exists() or "create_main_cluster = false" not in conf.read_text():
        conf.write_text("create_main_cluster = false\n")
    made_policy = not POLICY.exists()
    if made_policy:
        POLICY.write_text("#!/bin/sh\nexit 101\n")
        POLICY.chmod(0o755)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    options = ["-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
    try:
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *options, *packages],
        ):
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"system parts: `{' '.join(command)}` failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
                return False
    finally:
        if made_policy:
            POLICY.unlink(missing_ok=True)
    return True


def main() -> int:
    missing = missing_parts()
    if not missing:
        return 0
    tried = os.geteuid() == 0 and shutil.which("apt-get") is not None
    if tried:
        print(f"system parts: installing {' '.join(missing)} with apt-get", flush=True)
        install(missing)
        missing = missing_parts()
        if not missing:
            return 0
    consequence = "fail (CI=true)" if in_ci() else "skip, each naming what it needs"
    fix = (
        "apt-get did not make them usable here (see above)"
        if tried
        else f"install them with `sudo apt-get install {' '.join(missing)}` (or run this command as root, which does)"
    )
    print(
        f"system parts: missing: {' '.join(missing)}; the tests that need them will {consequence}; {fix}",
        file=sys.stderr,
    )
    for package in missing:
        print(f"  {package}: {SYSTEM_PARTS[package].gives}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
