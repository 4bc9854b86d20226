"""seal_process makes the process undumpable, and leaves its own /proc readable to it."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import ctypes, os
from dsh.paths import seal_process
before = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
sealed = seal_process()
after = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
print(before, sealed, after, len(os.listdir("/proc/self/fd")) > 0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_DUMPABLE) is Linux's")
def test_a_sealed_process_is_undumpable_and_still_reads_its_own_proc() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "True", "0", "True"]
