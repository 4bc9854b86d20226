"""Keeping the commands a long-lived dsh process starts out of that process (``prctl(PR_SET_DUMPABLE, 0)``)."""

from __future__ import annotations

import sys

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3


def seal_process() -> bool:
    """Make this process undumpable, so processes of the same user cannot reach into it; True once it is.

    A command's shell runs as the user who runs dsh, and such a process may open
    ``/proc/<dsh>/fd/N`` (``dsh serve``'s client connections, ``dsh mcp``'s protocol pipes), read
    ``/proc/<dsh>/mem`` or ptrace it: a command could then forge another call's answer or read
    the next request. Undumpable, the kernel refuses all of that to any process without
    ``CAP_SYS_PTRACE`` (root, or a process given that capability, still can; so can nothing less).
    The process's own ``/proc/self`` stays readable to itself. False where there is no ``prctl``
    (not Linux) or it refused.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # only the long-lived servers seal themselves: a cold command never loads ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return False
        return bool(libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
