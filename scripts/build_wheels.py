"""Build every distribution in packages/ into one folder of wheels, for installing without Hatch.

    python3 scripts/build_wheels.py [OUT] [--no-deps]

OUT defaults to ``dist/wheels``. Unless ``--no-deps`` is given, the wheels of every third-party
dependency are put there too, at the versions of the project's lock (``constraints.txt``, see
``scripts/lock.py``: the versions its own runs test), so that

    python3 -m venv VENV && VENV/bin/pip install --no-index --find-links OUT dsh-cli dsh-persistence-sqlite

installs from that folder alone, into a virtual environment (a system interpreter refuses a global
install, PEP 668), and can never pick up an unrelated ``dsh-*`` from a package index. The folder also
holds Hatchling, the build backend of dsh's distributions and of the example contributor, so a
contributor of your own builds from it as well (``VENV/bin/pip install --no-index --find-links OUT
./examples/dsh-example-region``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from lock import chosen_lock  # scripts/lock.py, beside this file

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Build the wheels; return pip's exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(REPO / "dist" / "wheels"), help="folder for the wheels")
    parser.add_argument("--no-deps", action="store_true", help="build only the dsh-* distributions")
    args = parser.parse_args(argv)
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    packages = sorted(str(p) for p in (REPO / "packages").iterdir() if (p / "pyproject.toml").is_file())
    command = [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--wheel-dir", str(out)]
    command += ["--constraint", str(chosen_lock())]
    if args.no_deps:
        command.append("--no-deps")
    backend = [] if args.no_deps else ["hatchling"]  # for building contributors from the folder alone
    result = subprocess.run([*command, *packages, *backend], check=False)
    if result.returncode == 0:
        print(
            f"wheels in {out}; install them into a virtual environment VENV with:\n"
            f"  python3 -m venv VENV && VENV/bin/pip install --no-index --find-links {out} dsh-cli"
        )
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
