"""How every verb prints: its ``--json`` document or its lines, whole or with ``OutputLost``."""

from __future__ import annotations

import json
import sys
from typing import Any

from ._fast._streams import write_all


def json_text(value: Any) -> str:
    """``value`` as every ``--json`` output prints it: indented, non-ASCII kept as is, one final newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def print_json(value: Any) -> None:
    """Print ``value`` as :func:`json_text` writes it (``OutputLost`` when stdout cannot take it)."""
    write_all(json_text(value), sys.stdout, json=True)


def say(*lines: str) -> None:
    """Print each line and a newline, at once (``OutputLost`` when stdout cannot take them: closed, full).

    Not ``print``: with fd 1 closed when dsh started, ``sys.stdout`` is None and ``print`` writes
    nothing and reports nothing, so ``dsh sessions list >&-`` would exit 0 having said nothing.
    """
    write_all("".join(line + "\n" for line in lines), sys.stdout)
