"""Test utilities for the dsh distributions' own tests (never a runtime dependency).

Installing this distribution registers a pytest plugin (``dsh.testing._fixtures``): every test
starts without ambient ``DSH_*`` variables, and ``postgres_server``/``pg_schema`` give a throw-away
PostgreSQL server when one can be started, and ``sticky_tmp`` a fresh folder like ``/tmp`` (root's,
mode 1777) where :data:`OTHER_UID` (see :func:`as_other_uid`) can plant files. :class:`Endpoint` is
a loopback HTTP server replaying recorded replies, for model providers' tests.
"""

from ._dists import dsh, make_dist, remove_dist, touch_dir
from ._endpoint import Endpoint, Seen, load_exchanges
from ._parts import SYSTEM_PARTS, SystemPart, in_ci, missing_parts, missing_reason, require_parts
from ._processes import STALLED_TIMEOUT, group_members, stall, stalled_command, wait_for_group_end, wait_for_group_size
from ._uid import OTHER_UID, as_other_uid, fork_as_other_uid, needs_root

__all__ = [
    "OTHER_UID",
    "STALLED_TIMEOUT",
    "SYSTEM_PARTS",
    "Endpoint",
    "Seen",
    "SystemPart",
    "as_other_uid",
    "dsh",
    "fork_as_other_uid",
    "group_members",
    "in_ci",
    "load_exchanges",
    "make_dist",
    "missing_parts",
    "missing_reason",
    "needs_root",
    "remove_dist",
    "require_parts",
    "stall",
    "stalled_command",
    "touch_dir",
    "wait_for_group_end",
    "wait_for_group_size",
]
