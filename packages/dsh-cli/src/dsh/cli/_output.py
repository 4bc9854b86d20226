"""How every verb prints: its ``--json`` document or its lines, whole or with ``OutputLost``."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from dsh.cli_fast._streams import write_all


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


_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
"""Characters that reorder the text around them on screen, so a line reads other than it runs."""

_ESCAPES = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in (*range(0x20), *range(0x7F, 0xA0), *_BIDI)
    if code not in (0x09, 0x0A)  # a tab and a line break are layout, never a terminal command
}


def terminal_safe(text: str) -> str:
    """``text`` with every control character but tab and newline (C0, DEL, C1) and every bidirectional
    control written as a visible escape (``\\x1b``, ``\\u202e``): what a recorded command or its output
    holds is shown, never obeyed by the terminal (an OSC 52 clipboard write, a screen clear, a title)."""
    return text.translate(_ESCAPES)


def on_terminal(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal (a closed or detached stream is not)."""
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # closed
        return False
