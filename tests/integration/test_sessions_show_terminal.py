"""``dsh sessions show`` on a real terminal (a pty): a recorded command's escapes are shown, never obeyed.

A transcript holds whatever a command and its output held: an OSC 52 clipboard write, a screen clear,
a carriage return that hides the start of a line, a right-to-left override. Written raw to a terminal,
each acts on the reader's terminal; escaped, each is read. A pipe and ``--json`` keep the text exact.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import dsh

pytestmark = pytest.mark.integration

HANG = 60  # seconds: far above a cold `dsh sessions show`, far below a hang worth waiting for

CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: set the clipboard to "pwned"
CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
HIDDEN = "rm -rf ~/important\r\x1b[2Kecho harmless"  # CR + erase line: only "echo harmless" would show
BIDI = "\u202eexe.txt"  # a right-to-left override

# Bash single quotes keep every byte; the command's own text carries the escapes, and so does its output.
COMMAND = f"printf '%s' '{CLIPBOARD}'; printf '%s\\n' '{CLEAR}{BIDI}' >&2; : '{HIDDEN}'"


def _session(home: Path) -> str:
    done = dsh("exec", "--no-server", "--json", "--", COMMAND, home=home, cwd=home.parent, timeout=HANG)
    assert done.returncode == 0, done
    session: str = json.loads(done.stdout)["session_id"]
    return session


def _on_a_terminal(home: Path, *args: str) -> tuple[int, bytes]:
    """Run ``dsh ARGS`` with stdout and stderr on a pty; its status and every byte the terminal got."""
    primary, secondary = pty.openpty()
    env = {**os.environ, "DSH_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", *args], stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary, env=env
    )
    os.close(secondary)
    got = bytearray()
    deadline = time.monotonic() + HANG
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            got += chunk
        status = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(primary)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    return status, bytes(got).replace(b"\r\n", b"\n")  # the terminal's own ONLCR


def test_sessions_show_on_a_terminal_escapes_the_recorded_control_characters(tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = _session(home)
    status, shown = _on_a_terminal(home, "sessions", "show", session)
    assert status == 0, shown
    for byte in (b"\x1b", b"\x07", b"\r", "\u202e".encode()):
        assert byte not in shown, f"{byte!r} reached the terminal: {shown!r}"
    text = shown.decode()
    assert "\\x1b]52;c;cHduZWQ=\\x07" in text  # the command line and its stdout, both escaped
    assert "rm -rf ~/important\\x0d\\x1b[2Kecho harmless" in text  # what the carriage return would have hidden
    assert "\\x1b[2J\\x1b[H\\u202eexe.txt" in text  # its stderr
    assert f"session {session}" in text


def test_sessions_show_through_a_pipe_keeps_the_bytes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = _session(home)
    env = {**os.environ, "DSH_HOME": str(home)}
    done = subprocess.run(  # bytes, not text: universal newlines would turn the recorded \r into \n
        [sys.executable, "-m", "dsh.cli", "sessions", "show", session], capture_output=True, env=env, timeout=HANG
    )
    assert done.returncode == 0, done
    assert f"$ {COMMAND}   [".encode() in done.stdout
    assert f"| {CLIPBOARD}\n".encode() in done.stdout
    assert f"! {CLEAR}{BIDI}\n".encode() in done.stdout


def test_sessions_show_json_on_a_terminal_keeps_the_text_exact(tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = _session(home)
    status, shown = _on_a_terminal(home, "sessions", "show", "--json", session)
    assert status == 0, shown
    assert b"\x1b" not in shown  # JSON writes a control character as \u001b, on a terminal or not
    events = json.loads(shown)["events"]
    (call,) = (e for e in events if e["type"] == "tool/call")
    (result,) = (e for e in events if e["type"] == "tool/result")
    assert call["data"]["arguments"]["command"] == COMMAND
    assert result["data"]["data"]["stdout"] == CLIPBOARD
    assert result["data"]["data"]["stderr"] == f"{CLEAR}{BIDI}\n"


def test_sessions_list_on_a_terminal_escapes_a_recorded_working_directory(tmp_path: Path) -> None:
    home, odd = tmp_path / "home", tmp_path / "a\x1b]0;title\x07b"
    odd.mkdir()
    done = dsh("exec", "--no-server", "--cwd", str(odd), "--", "true", home=home, timeout=HANG)
    assert done.returncode == 0, done
    status, shown = _on_a_terminal(home, "sessions", "list")
    assert status == 0, shown
    assert b"\x1b" not in shown and b"\x07" not in shown
    assert "a\\x1b]0;title\\x07b" in shown.decode()
