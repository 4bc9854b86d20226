"""Acting as a second, real user: what another local user could do to a root-run dsh."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable

import pytest

OTHER_UID = 65534
"""The second uid the tests act as (``nobody``)."""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to act as a second uid (os.setuid in a forked child)"
)
"""Mark a test that acts as :data:`OTHER_UID`, which only root can become."""


def fork_as_other_uid(work: Callable[[], object]) -> int:
    """Fork a child that runs ``work`` as :data:`OTHER_UID` (exit 0 when it returns); return its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            os.setgroups([])
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            result = work()
            code = result if isinstance(result, int) else 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def as_other_uid(work: Callable[[], object]) -> int:
    """Run ``work`` in a forked child as :data:`OTHER_UID`; return its exit status."""
    _, status = os.waitpid(fork_as_other_uid(work), 0)
    return os.waitstatus_to_exitcode(status)
