"""The ``dsh`` command line: its parser and the wire format of ``dsh serve`` (standard library only).

Kept free of dsh's heavier imports so a ``dsh exec`` served by ``dsh serve`` starts fast.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dsh.paths import resolve_dsh_home

BLOCKED_EXIT = 126
"""Exit status of ``dsh exec`` when a hook blocked the command (it never ran)."""

PROTOCOL = 1
"""Version of the newline-delimited JSON spoken between ``dsh exec`` and ``dsh serve``."""


def installed_versions() -> list[tuple[str, str]]:
    """Every installed distribution named ``dsh-*``, with its version, sorted by name."""
    from importlib.metadata import distributions  # only --version needs it

    found = {(d.metadata["Name"] or "").lower(): d.version for d in distributions()}
    return sorted((name, version) for name, version in found.items() if name.startswith("dsh-"))


class _Version(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="list the installed dsh distributions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        sys.stdout.write("".join(f"{name} {version}\n" for name, version in installed_versions()))
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``dsh`` verb."""
    parser = argparse.ArgumentParser(prog="dsh", description="Run shell commands and agents that know their session.")
    parser.add_argument("--version", action=_Version)
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


DEPLOYMENT_ENV = "DSH_DEPLOYMENT"
"""Environment variable naming the deployment file when ``--deployment`` is not given."""


class DeploymentChoice:
    """Which deployment a command uses and why: ``path`` is None for the built-in one."""

    # A plain class: dataclasses costs the served client's start-up several milliseconds.
    __slots__ = ("path", "reason")

    def __init__(self, path: str | None, reason: str) -> None:
        self.path = path
        self.reason = reason

    def __repr__(self) -> str:
        return f"DeploymentChoice({self.path!r}, {self.reason!r})"


def choose_deployment(flag: str | None, env: Mapping[str, str] | None = None) -> DeploymentChoice:
    """The one rule every command follows to pick its deployment.

    ``--deployment FILE``, else ``$DSH_DEPLOYMENT``, else ``<DSH_HOME>/deployment.yaml`` when it
    exists, else the built-in default.
    """
    env = os.environ if env is None else env
    if flag:
        return DeploymentChoice(os.path.abspath(flag), "given with --deployment")
    named = env.get(DEPLOYMENT_ENV, "").strip()
    if named:
        return DeploymentChoice(os.path.abspath(os.path.expanduser(named)), f"named by ${DEPLOYMENT_ENV}")
    in_home = resolve_dsh_home(None, env) / "deployment.yaml"
    if in_home.is_file():
        return DeploymentChoice(str(in_home), "found in DSH_HOME")
    return DeploymentChoice(None, f"built-in default: no --deployment, no ${DEPLOYMENT_ENV}, no {in_home}")


def socket_path(deployment: str | None, env: Mapping[str, str] | None = None) -> Path:
    """Where ``dsh serve`` listens for a deployment (the built-in one when None): the one rule.

    Placed under the home of the environment (``$DSH_HOME``, else ``~/.dsh``), not a home the
    deployment file may name, so a client finds it without reading the file.
    """
    key = os.path.abspath(deployment) if deployment else "<default>"
    home = resolve_dsh_home(None, os.environ if env is None else env)
    return home / "run" / f"dsh-{hashlib.sha256(key.encode()).hexdigest()[:16]}.sock"
