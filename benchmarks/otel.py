"""Cold ``dsh exec -- true`` with dsh-otel not installed, installed but off, off by
``OTEL_SDK_DISABLED=true``, and on with an exporter to a collector on loopback: ratios in one run.

    python benchmarks/otel.py [--rounds N]     # or: hatch run bench --only bench_otel

"Not installed" is this same environment seen without dsh-otel: a folder of links to every entry of
the environment's site-packages except the files dsh-otel installed there (its ``.dist-info`` and its
editable ``.pth``), so its entry point is not found. Every variant starts the same way
(``python -S`` adding one such folder with ``site.addsitedir``, then ``dsh.cli`` as ``__main__``),
so the launcher's own cost is the same on both sides of each ratio. The collector answers every
export with an empty 200 at once: what is measured is dsh's side of exporting.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

from curves import child_env, interleave

_LAUNCH = "import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); runpy.run_module('dsh.cli', run_name='__main__')"


def _site_without_otel(tmp: Path) -> tuple[Path, Path]:
    """(the environment's site-packages, a folder of links to it without dsh-otel's own files)."""
    dist = distribution("dsh-otel")
    site_dir = Path(str(dist.locate_file(""))).resolve()
    own = {Path(str(f)).parts[0] for f in dist.files or ()}
    mirror = tmp / "site-without-otel"
    mirror.mkdir()
    for entry in site_dir.iterdir():
        if entry.name not in own:
            (mirror / entry.name).symlink_to(entry)
    return site_dir, mirror


@contextmanager
def _collector() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def bench_otel(tmp: Path, rounds: int) -> dict[str, Any]:
    """Cold ``dsh exec`` without dsh-otel, and with it off, disabled and exporting, as ratios."""
    import os

    home = tmp / "otel-home"
    home.mkdir(mode=0o700)
    site_dir, mirror = _site_without_otel(tmp)
    plain = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env = child_env(plain, DSH_HOME=str(home))
    disabled = {**env, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}
    command = ["exec", "--no-server", "--", "true"]

    def job(site: Path, environ: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        return [sys.executable, "-S", "-c", _LAUNCH, str(site), *command], environ

    with _collector() as endpoint:
        enabled = {**env, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
        med = interleave(
            {
                "without": job(mirror, env),
                "installed_off": job(site_dir, env),
                "installed_sdk_disabled": job(site_dir, disabled),
                "exporting_to_loopback": job(site_dir, enabled),
            },
            rounds,
        )
    base = med["without"]["ms"]
    return {
        "otel_cold_exec": {
            "without_ms": base,
            **{f"{k}_ms": v["ms"] for k, v in med.items() if k != "without"},
            **{f"{k}_ratio": v["ms"] / base for k, v in med.items() if k != "without"},
            "rounds": rounds,
        }
    }


if __name__ == "__main__":
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-otel-") as tmp:
        print(json.dumps(bench_otel(Path(tmp), args.rounds), indent=2))
