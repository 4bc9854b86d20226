"""Test utilities for the dsh distributions' own tests (never a runtime dependency).

Installing this distribution registers a pytest plugin (``dsh.testing._fixtures``): every test
starts without ambient ``DSH_*`` variables, and ``postgres_server``/``pg_schema`` give a throw-away
PostgreSQL server when one can be started.
"""

from ._dists import dsh, make_dist, remove_dist, touch_dir

__all__ = ["dsh", "make_dist", "remove_dist", "touch_dir"]
