"""How every verb prints its ``--json`` document."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(value: Any) -> None:
    """Print ``value`` as indented JSON, non-ASCII kept as is."""
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
