"""The ``dsh`` command line: its parser and the wire format of ``dsh serve`` (standard library only).

Kept free of dsh's heavier imports so a ``dsh exec`` served by ``dsh serve`` starts fast.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

BLOCKED_EXIT = 126
"""Exit status of ``dsh exec`` when a hook blocked the command (it never ran)."""

PROTOCOL = 1
"""Version of the newline-delimited JSON spoken between ``dsh exec`` and ``dsh serve``."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``dsh`` verb."""
    parser = argparse.ArgumentParser(prog="dsh", description="Run shell commands and agents that know their session.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="verb", required=True)

    def common(p: argparse.ArgumentParser, session: bool = True, json: bool = True) -> None:
        p.add_argument("--deployment", metavar="FILE", help="deployment YAML (default: the built-in one)")
        if session:
            p.add_argument("--session", metavar="ID", help="resume this session instead of creating one")
        if json:
            p.add_argument("--json", action="store_true", help="print JSON")
        # SUPPRESS keeps `dsh --debug VERB` working: the sub-parser must not reset it to False.
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")

    p = sub.add_parser("exec", help="run COMMAND as the model's bash tool would, as one turn")
    common(p)
    p.add_argument("--cwd", metavar="DIR", help="working directory of a new session")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="kill the command after this long")
    p.add_argument("--no-server", action="store_true", help="run in this process even when `dsh serve` listens")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")

    p = sub.add_parser("run", help="drive the agent loop with a scripted model")
    common(p)
    p.add_argument("--script", required=True, metavar="FILE", help="YAML or JSON script of turns")

    p = sub.add_parser("env", help="the catalogue of managed DSH_* variables")
    common(p)

    p = sub.add_parser("plugins", help="discovered plugins and their state")
    common(p, session=False)

    p = sub.add_parser("serve", help="keep a deployment loaded so `dsh exec` starts fast")
    common(p, session=False, json=False)

    p = sub.add_parser("sessions", help="stored sessions")
    sessions = p.add_subparsers(dest="action", required=True)
    s = sessions.add_parser("list", help="every stored session")
    common(s, session=False)
    for action in ("show", "locate"):
        s = sessions.add_parser(action, help=f"{action} one session")
        s.add_argument("id", metavar="ID")
        common(s, session=False)
    return parser


def command_line(words: Sequence[str]) -> str:
    """The shell command line of ``dsh exec -- WORDS``.

    One word is a command line as typed; several are argv words, quoted so the shell sees them as
    given (so ``dsh exec -- dsh exec -- 'echo $X'`` expands ``$X`` in the inner shell).
    """
    words = list(words)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        return ""
    return words[0] if len(words) == 1 else shlex.join(words)


def socket_path(home: Path, deployment: str | None) -> Path:
    """Where ``dsh serve`` listens for a deployment (the built-in one when None)."""
    key = os.path.abspath(deployment) if deployment else "<default>"
    return home / "run" / f"dsh-{hashlib.sha256(key.encode()).hexdigest()[:16]}.sock"
