"""Shared fixtures: every test starts in an environment free of ambient dsh state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh.bash import is_managed_key

REPO = Path(__file__).resolve().parent.parent
PEER_SCHEMAS = REPO / "tests" / "data" / "peer-schemas"
"""The peers' published hook schemas, carried in the repository (see its README for source and version)."""


@pytest.fixture(autouse=True)
def _no_ambient_dsh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start without the developer's own DSH_* variables (a test may add its own)."""
    for key in list(os.environ):
        if is_managed_key(key):
            monkeypatch.delenv(key)
