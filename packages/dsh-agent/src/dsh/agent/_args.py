"""The ``dsh`` command line: its parser and the wire format of ``dsh serve`` (standard library only).

Kept free of dsh's heavier imports so a ``dsh exec`` served by ``dsh serve`` starts fast.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dsh.paths import resolve_dsh_home

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from typing import Any

TIMEOUT_EXIT = 124
"""Exit status of ``dsh exec`` when a timeout killed the command (the executor reports it so)."""
FAILURE_EXIT = 125
"""Exit status of ``dsh exec`` when dsh itself failed, before the command ran or while recording it."""
BLOCKED_EXIT = 126
"""Exit status of ``dsh exec`` when a hook blocked the command (it never ran)."""
DEFAULT_TIMEOUT_TEXT = "120 s"
MAX_TIMEOUT_TEXT = "600 s"

EXEC_EPILOG = f"""\
the command:
  One word after -- is a shell line, as typed:       dsh exec -- 'echo $DSH_SESSION_ID | wc -c'
  Several words are argv, each quoted for the shell: dsh exec -- printf '%s\\n' "two words"
  (so a nested `dsh exec -- dsh exec -- 'echo $X'` expands $X in the inner shell). It runs in
  bash with no standard input, as the model's bash tool runs it.

examples:
  dsh exec -- 'echo "session $DSH_SESSION_ID writes $DSH_SESSION_JSONL"'
  dsh exec --json --timeout 5 -- 'make test'
  dsh exec --session ID -- 'git status'          the next turn of a stored session

timeout:
  Without --timeout the bash tool's default_timeout applies ({DEFAULT_TIMEOUT_TEXT} unless the deployment
  configures tool-bash otherwise); --timeout may not exceed its max_timeout ({MAX_TIMEOUT_TEXT} by default).

exit status:
  N      the command's own exit status
  {TIMEOUT_EXIT}    the timeout killed the command's process group; the output produced before is
         kept, shown and recorded, and one line on stderr says so ("timed_out": true in --json)
  {FAILURE_EXIT}    dsh itself failed: before the command ran (home, session, lock, backend; nothing
         ran), or after it ran (its output is still shown; the transcript was not saved;
         "error" in --json beside the command's exit_code)
  {BLOCKED_EXIT}    a hook blocked the command; it never ran
  128+N  signal N killed the command, or dsh got SIGINT, SIGTERM or SIGHUP (the command's
         process group is killed and the turn recorded as interrupted)
  2      the dsh command line is invalid
"""


def positive_seconds(text: str) -> float:
    """``--timeout`` and ``--idle-timeout``: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return value


def exec_status(result: Mapping[str, Any]) -> int:
    """``dsh exec``'s exit status for its ``--json`` document (in-process or served)."""
    return FAILURE_EXIT if result.get("error") else int(result["exit_code"])


def exec_notices(result: Mapping[str, Any]) -> list[str]:
    """The lines ``dsh exec`` writes to stderr after the command's own output."""
    lines = []
    if result.get("timed_out"):
        after = f" after {result['timeout']:g} s" if isinstance(result.get("timeout"), int | float) else ""
        lines.append(
            f"dsh: the command timed out{after} and its process group was killed; allow longer with --timeout SECONDS"
        )
    if result.get("error"):
        lines.append(f"dsh: the command ran, but {result['error']}")
    return lines


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


_DEPLOYMENT_HELP = (
    "deployment YAML; default: $DSH_DEPLOYMENT, else $DSH_HOME/deployment.yaml if it exists, else the built-in one"
)


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``dsh`` verb."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="dsh",
        description="Run shell commands and agents that know their session: every shell call gets\n"
        "DSH_HOME, DSH_SHELL, DSH_SESSION_ID and the other managed DSH_* variables.",
        epilog=_examples(
            "dsh exec -- 'echo $DSH_SESSION_ID'      run one command as the model's bash tool would",
            "dsh sessions list                        the stored sessions",
            "dsh VERB --help                          each verb's options and examples",
        ),
        formatter_class=raw,
    )
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, summary: str, *examples: str, parent: object = sub) -> argparse.ArgumentParser:
        # `parent` is a sub-parser action; its class is private to argparse, so it is not named here.
        # The one-line help in the verb list: the summary's first clause, never half a line.
        short = summary.replace("\n", " ").split(". ")[0].split(": ")[0].rstrip(".:,")
        made: argparse.ArgumentParser = getattr(parent, "add_parser")(  # noqa: B009
            name, help=short, description=summary, epilog=_examples(*examples), formatter_class=raw
        )
        return made

    def common(p: argparse.ArgumentParser, session: str | None = None, json: bool = True) -> None:
        p.add_argument("--deployment", metavar="FILE", help=_DEPLOYMENT_HELP)
        if session:
            p.add_argument("--session", metavar="ID", help=session)
        if json:
            p.add_argument("--json", action="store_true", help="print JSON instead of text")
        # SUPPRESS keeps `dsh --debug VERB` working: the sub-parser must not reset it to False.
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")

    p = sub.add_parser(
        "exec",
        help="run COMMAND as the model's bash tool would, as one turn",
        epilog=EXEC_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common(p, session="run as the next turn of this stored session instead of a new one")
    p.add_argument("--cwd", metavar="DIR", help="working directory of a new session")
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help=f"kill the command's process group after this long "
        f"(default {DEFAULT_TIMEOUT_TEXT}; at most {MAX_TIMEOUT_TEXT})",
    )
    p.add_argument("--no-server", action="store_true", help="run in this process even when `dsh serve` listens")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")

    p = verb(
        "run",
        "Drive the agent loop with the keyless scripted model.\n"
        "Each scripted turn is a user prompt and the model's steps (text and tool calls);\n"
        "the script format is in packages/dsh-agent/README.md, section 'The scripted model'.",
        "dsh run --script demo.yaml",
        "dsh run --script demo.yaml --session ID --json     continue a stored session",
        "",
        "a script:",
        "  turns:",
        "    - user: where is my transcript?",
        "      steps:",
        "        - tool_calls: [{name: bash, arguments: {command: 'echo $DSH_SESSION_JSONL'}}]",
        "        - text: done",
    )
    common(p, session="continue this stored session instead of creating one")
    p.add_argument("--script", required=True, metavar="FILE", help="YAML (or .json) script of turns")

    p = verb(
        "env",
        "The catalogue of managed DSH_* variables:\nkey, owner, distribution, description, and whether it is built in.",
        "dsh env",
        "dsh env --session ID --json      also the values a shell call of that session would get",
    )
    common(p, session="also show the values a shell call of this stored session would get")

    p = verb(
        "plugins",
        "The deployment in effect (and why), then every discovered plugin:\n"
        "group, name, distribution, version, state and error.",
        "dsh plugins",
        "dsh plugins --deployment sqlite.yaml --json",
    )
    common(p)

    p = verb(
        "serve",
        "Keep a deployment loaded and answer `dsh exec` from clients of the same user\n"
        "over a private Unix socket under $DSH_HOME/run, so each exec skips the start-up.\n"
        "Stop it with Ctrl-C or SIGTERM.",
        "dsh serve &",
        "dsh exec -- 'echo served'          uses the server when one listens for the same deployment",
    )
    common(p, json=False)
    p.add_argument(
        "--idle-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="close a connection that has not delivered its whole request after this long (default: 10)",
    )

    p = verb("sessions", "Stored sessions of the deployment's persistence backend.", "dsh sessions list")
    sessions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = verb(
        "list",
        "Every stored session, oldest first; damaged ones are reported on stderr.",
        "dsh sessions list --json",
        parent=sessions,
    )
    common(s)
    s = verb(
        "show",
        "One session as a readable transcript:\nturns, user text, tool calls with status and output, hooks, subagents.",
        "dsh sessions show ID",
        "dsh sessions show ID --json     header, location, events and damage as JSON",
        parent=sessions,
    )
    s.add_argument("id", metavar="ID")
    common(s)
    s = verb(
        "locate",
        "Where the session's transcript file is\n(nothing for backends without one, such as SQLite).",
        "dsh sessions locate ID",
        'tail -f "$(dsh sessions locate ID)"',
        parent=sessions,
    )
    s.add_argument("id", metavar="ID")
    common(s)
    s = verb(
        "migrate",
        "Bring the session store's schema to this dsh's version (SQLite, PostgreSQL).\n"
        "The first use does the same; a store written by a newer dsh is refused, never written.",
        "dsh sessions migrate --deployment fleet.yaml",
        parent=sessions,
    )
    common(s, json=False)
    s = verb(
        "fork",
        "A new stored session from a prefix of another: new id, new location,\n"
        "parent_session and origin 'fork' in its header. Prints the new id.",
        "dsh sessions fork ID                  every turn of ID",
        "dsh sessions fork ID --at 2 --json    only its first two turns",
        "dsh exec --session \"$(dsh sessions fork ID)\" -- 'echo $DSH_SESSION_ID'",
        parent=sessions,
    )
    s.add_argument("id", metavar="ID")
    s.add_argument("--at", type=int, metavar="TURN", help="keep the first TURN turns (default: every turn)")
    common(s)
    s = verb(
        "verify",
        "Check a transcript against its session: by default, inside a harness-managed shell,\n"
        "that $DSH_SESSION_JSONL is a file you own, not writable by others, whose header id is\n"
        "$DSH_SESSION_ID. Exit 0 when consistent (a first turn not yet flushed says so),\n"
        "1 with one line per problem.",
        "dsh sessions verify                   in a shell the model runs",
        "dsh sessions verify --call            also: $DSH_TOOL_CALL_ID is recorded or pending",
        "dsh sessions verify --session ID      ask the deployment where ID's transcript is",
        parent=sessions,
    )
    s.add_argument("--path", metavar="FILE", help="the transcript to check (default: $DSH_SESSION_JSONL)")
    s.add_argument("--call", action="store_true", help="also check that $DSH_TOOL_CALL_ID is recorded or pending")
    common(s, session="the session to check (default: $DSH_SESSION_ID)")

    p = verb(
        "skills",
        "Skills found now under $DSH_HOME/skills/<name>/SKILL.md and shipped by plugin\n"
        "distributions (dsh.skills entry points); malformed files are warnings on stderr.",
        "dsh skills",
        "dsh skills --json",
    )
    common(p)
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
