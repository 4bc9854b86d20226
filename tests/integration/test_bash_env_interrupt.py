"""Ctrl-C while `dsh exec` waits for a contributor's resolve stops it at once: nothing runs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import make_dist
from tests.integration.serve_support import clean_env

pytestmark = pytest.mark.integration

SLOW_RESOLVE = """
import os, time

class Slow:
    name = "slow"
    variables = {"DSH_SLOW": "resolves in 30 s"}

    def resolve(self, execution):
        open(os.environ["SLOW_MARKER"], "w").close()
        time.sleep(30)
        return {}

slow = Slow()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_breaks_the_wait_for_a_resolve(tmp_path: Path, sig: signal.Signals) -> None:
    site, home, marker, ran = tmp_path / "site", tmp_path / "home", tmp_path / "resolving", tmp_path / "ran"
    make_dist(
        site, "dsh-slow-resolve", "1.0", {"dsh.bash_env": {"slow": "slow_resolve:slow"}}, {"slow_resolve": SLOW_RESOLVE}
    )
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text("plugins:\n  - id: bash-env\n    config: {resolve_timeout: 20}\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsh.cli",
            "exec",
            "--no-server",
            "--deployment",
            str(deployment),
            "--",
            f"echo > {ran}",
        ],
        env=clean_env(home, PYTHONPATH=str(site), SLOW_MARKER=str(marker)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    end = time.monotonic() + 60
    while not marker.exists():  # the resolve runs on its thread; dsh waits for it (20 s deadline)
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()
        time.sleep(0.02)
    time.sleep(0.1)
    sent = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 10, "dsh waited for the resolve instead of the signal"
    assert proc.returncode == 128 + sig.value, err
    assert err == f"dsh: interrupted by {sig.name} before any command started: nothing ran\n"
    assert out == "" and not ran.exists()
