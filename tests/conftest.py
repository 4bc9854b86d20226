"""The root suite's data: where the repository is and the peers' hook schemas.

Fixtures every dsh test gets (no ambient ``DSH_*``, a throw-away PostgreSQL) come from the
``dsh.testing`` pytest plugin.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PEER_SCHEMAS = REPO / "tests" / "data" / "peer-schemas"
"""The peers' published hook schemas, carried in the repository (see its README for source and version)."""
