"""What ``dsh sessions show`` and ``list`` write to a terminal: control characters as visible escapes."""

from __future__ import annotations

import io
import os

from dsh.cli._output import on_terminal, terminal_safe


def test_every_control_character_but_tab_and_newline_is_escaped() -> None:
    controls = "".join(map(chr, (*range(0x20), *range(0x7F, 0xA0))))
    shown = terminal_safe(controls)
    assert shown.startswith("\\x00\\x01") and "\t\n" in shown and "\\x1b" in shown
    assert "\\x7f\\x80" in shown and shown.endswith("\\x9f")  # DEL and C1 (0x9b is an 8-bit CSI)
    assert not any(c in shown for c in controls if c not in "\t\n")


def test_bidirectional_controls_are_escaped_and_other_text_is_kept() -> None:
    assert terminal_safe("a\u202eb\u2066c\u200fd") == "a\\u202eb\\u2066c\\u200fd"
    kept = "ls -la ~/été 日本 \\x1b | tab\there"
    assert terminal_safe(kept) == kept


def test_only_a_terminal_is_a_terminal() -> None:
    primary, secondary = os.openpty()
    try:
        with open(secondary, "w", closefd=False) as tty:
            assert on_terminal(tty)
    finally:
        os.close(primary)
        os.close(secondary)
    closed = io.StringIO()
    closed.close()
    assert not on_terminal(io.StringIO()) and not on_terminal(closed) and not on_terminal(None)
