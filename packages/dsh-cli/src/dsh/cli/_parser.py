"""The one parser of the ``dsh`` command line: every verb, its help and examples, and usage errors (exit 2).

Standard library only for the built-in verbs; a line naming another verb (``dsh mcp``), ``dsh --help``
or a typo also reads the ``dsh.commands`` group (``_commands``). A served ``dsh exec`` is read here
too, by the server (:func:`read_served`): its client sends the words unread, so help, errors and
their exit status are this module's alone, served or not.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsh.cli_fast._status import BLOCKED_EXIT, FAILURE_EXIT, TIMEOUT_EXIT
from dsh.cli_fast._wire import KEEPALIVE, KEEPALIVE_RANGE, MISSED_KEEPALIVES
from dsh.paths.deployment import choose_deployment

if TYPE_CHECKING:
    from dsh.loader import EntryPointItem

BUILTIN_VERBS = ("exec", "run", "env", "plugins", "serve", "sessions", "skills")
"""The verbs dsh-cli itself has; any other verb is looked up in the ``dsh.commands`` group."""

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


def command_words(words: Sequence[str]) -> list[str]:
    """The command's own words: what follows the ``--`` the parser keeps in front of them."""
    words = list(words)
    return words[1:] if words[:1] == ["--"] else words


def command_line(words: Sequence[str]) -> str:
    """The shell command line of ``dsh exec -- WORDS``.

    One word is a command line as typed; several are argv words, quoted so the shell sees them as
    given (so ``dsh exec -- dsh exec -- 'echo $X'`` expands ``$X`` in the inner shell).
    """
    words = command_words(words)
    if len(words) == 1:
        return words[0]
    return shlex.join(words)


def seconds(text: str) -> float | None:
    """The positive, finite number of seconds ``text`` is; else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None


def positive_seconds(text: str) -> float:
    """``--timeout`` and ``--idle-timeout``: a positive, finite number of seconds."""
    value = seconds(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return value


def step_count(text: str) -> int:
    """``dsh run --max-steps``: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of model steps, at least 1, not {text!r}")
    return value


def keepalive_seconds(text: str) -> float:
    """``dsh serve --keepalive``: seconds within :data:`KEEPALIVE_RANGE` (what a client accepts)."""
    low, high = KEEPALIVE_RANGE
    value = seconds(text)
    if value is None or not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from {low:g} to {high:g}, not {text!r}")
    return value


def installed_versions() -> list[tuple[str, str]]:
    """Every installed distribution named ``dsh-*``, with its version, sorted by name."""
    from importlib.metadata import distributions  # only --version needs it

    found = {(d.metadata["Name"] or "").lower(): d.version for d in distributions()}
    return sorted((name, version) for name, version in found.items() if name.startswith("dsh-"))


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with help printed whole or reported lost (argparse drops a failed write, so
    ``dsh --help >/dev/full`` said nothing and exited 0). Every verb's parser is one (argparse makes a
    sub-parser of its parent's class)."""

    def print_help(self, file: Any = None) -> None:  # typeshed's SupportsWrite: no module to import at run time
        from dsh.cli_fast._streams import write_all

        write_all(self.format_help(), sys.stdout if file is None else file)


class _Silent(_Parser):
    """A parser that prints nothing: help and usage errors end it with ``SystemExit`` alone (:func:`read_served`)."""

    def print_help(self, file: Any = None) -> None:
        pass

    def _print_message(self, message: str, file: Any = None) -> None:
        pass


class _Version(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="list the installed dsh distributions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from dsh.cli_fast._streams import write_all

        write_all("".join(f"{name} {version}\n" for name, version in installed_versions()), sys.stdout)
        parser.exit()


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's raw-description help, told the terminal width so it never imports :mod:`shutil`.

    argparse builds a formatter for every option it adds (to check its arguments), and one that is
    not told its width imports :mod:`shutil` (with its compression modules) to ask the terminal:
    milliseconds of every cold ``dsh env`` or ``dsh sessions list``, which print no help.
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` reports it: ``$COLUMNS``, the tty, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80 if sys.__stdout__ else 80
    except (OSError, ValueError):
        return 80


_DEPLOYMENT_HELP = (
    "deployment YAML; default: $DSH_DEPLOYMENT, else $DSH_HOME/deployment.yaml if it exists, else the built-in one"
)


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``dsh`` verb (the built-in ones; see :func:`parse` for the others)."""
    return _build()[0]


def _build(
    commands: dict[str, EntryPointItem] | None = None,
    running: str | None = None,
    kind: type[_Parser] = _Parser,
    only: str | None = None,
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """The parser of every verb (or of the built-in verb ``only``), and ``exec``'s own (for its usage errors).

    ``commands`` are the ``dsh.commands`` verbs to list; only ``running``'s is imported, to add its
    options. A line naming a built-in verb gets a parser of that verb alone (``only``): building
    every verb's options was a tenth of a cold ``dsh exec`` (measured), and a line naming one verb
    reads, and can be told of, that verb's options only. Every sub-parser is of the top one's
    ``kind`` (argparse's rule).
    """
    raw = _Formatter
    parser: argparse.ArgumentParser = kind(
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
        made.set_defaults(usage_parser=made)  # an unknown option is reported with this verb's usage (`parse`)
        return made

    def common(p: argparse.ArgumentParser, session: str | None = None, json: bool = True) -> None:
        p.add_argument("--deployment", metavar="FILE", help=_DEPLOYMENT_HELP)
        if session:
            p.add_argument("--session", metavar="ID", help=session)
        if json:
            p.add_argument("--json", action="store_true", help="print JSON instead of text")
        # SUPPRESS keeps `dsh --debug VERB` working: the sub-parser must not reset it to False.
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")

    exec_parser = None
    if only in (None, "exec"):
        exec_parser = p = sub.add_parser(
            "exec",
            help="run COMMAND as the model's bash tool would, as one turn",
            epilog=EXEC_EPILOG,
            formatter_class=_Formatter,
        )
        p.set_defaults(usage_parser=p)
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

    if only in (None, "run"):
        p = verb(
            "run",
            "Drive the agent loop: real turns with a model provider (--model, or the deployment's model),\n"
            "or the keyless scripted model (--script). With a provider the prompt is --prompt, else stdin,\n"
            "else (on a terminal) one prompt per turn until Ctrl-D; the assistant's text goes to stdout and\n"
            "one line per tool call to stderr. Each scripted turn is a user prompt and the model's steps;\n"
            "the script format is in packages/dsh-agent/README.md, section 'The scripted model'.",
            "dsh run --model openai --prompt 'where is my transcript?'",
            "dsh run --model openai --session ID        continue a stored session, prompts from the terminal",
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
        p.add_argument("--script", metavar="FILE", help="YAML (or .json) script of turns for the scripted model")
        p.add_argument("--model", metavar="PROVIDER", help="the dsh.models provider (openai, anthropic ...)")
        p.add_argument("--prompt", metavar="TEXT", help="the one turn's prompt (default: stdin, or a terminal loop)")
        p.add_argument(
            "--max-steps",
            type=step_count,
            metavar="N",
            help="model steps a turn may take before it fails (default: the deployment's loop.max_steps, 64)",
        )

    if only in (None, "env"):
        p = verb(
            "env",
            "The catalogue of managed DSH_* variables:\n"
            "key, owner, distribution, description, and whether it is built in.",
            "dsh env",
            "dsh env --session ID --json      also the values a shell call of that session would get",
        )
        common(p, session="also show the values a shell call of this stored session would get")

    if only in (None, "plugins"):
        p = verb(
            "plugins",
            "The deployment in effect (and why), then every discovered plugin:\n"
            "group, name, distribution, version, state and error.",
            "dsh plugins",
            "dsh plugins --deployment sqlite.yaml --json",
        )
        common(p)

    if only in (None, "serve"):
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
        p.add_argument(
            "--keepalive",
            type=keepalive_seconds,
            default=KEEPALIVE,
            metavar="SECONDS",
            help="tell each client its command still runs this often; a client gives up on a server silent "
            f"for {MISSED_KEEPALIVES} of these (default: {KEEPALIVE:g})",
        )

    if only in (None, "sessions"):
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
            "One session as a readable transcript:\n"
            "turns, user text, tool calls with status and output, hooks, subagents.",
            "dsh sessions show ID",
            "dsh sessions show ID --json     header, location, events and damage as JSON",
            parent=sessions,
        )
        s.add_argument("id", metavar="ID")
        common(s)
        s = verb(
            "locate",
            "Where the session's transcript file is. For a backend without one (SQLite, PostgreSQL) stdout\n"
            'stays empty, one line on stderr says so, and the exit status is 1 (--json: "location": null, status 0).',
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

    if only in (None, "skills"):
        p = verb(
            "skills",
            "Skills found now under $DSH_HOME/skills/<name>/SKILL.md and shipped by plugin\n"
            "distributions (dsh.skills entry points); malformed files are warnings on stderr.",
            "dsh skills",
            "dsh skills --json",
        )
        common(p)
    if only is None:
        _added_verbs(commands or {}, running, verb, common)
    return parser, exec_parser


def _added_verbs(commands: dict[str, EntryPointItem], running: str | None, verb: Any, common: Any) -> None:
    """Sub-parsers for the verbs of the ``dsh.commands`` group; the one that runs is loaded and configured."""
    from . import _commands

    for name, item in sorted(commands.items()):
        if name in BUILTIN_VERBS:
            continue  # a built-in verb is never displaced by an installed distribution
        p = verb(name, _commands.summary(item) if running in (None, name) else name, f"dsh {name} --help")
        common(p, json=False)
        if name == running:
            command = _commands.load(item)
            command.configure(p)
            p.set_defaults(plugin_command=command, plugin_source=f"{item.distribution} {item.version}")
    for name, dist in _commands.KNOWN_COMMANDS.items():
        if name not in commands and running is None:
            verb(name, f"install {dist} to use it (not installed)")


def _verb_word(words: Sequence[str]) -> str | None:
    """The verb a command line names: its first word that is no option (the top-level ones take no value)."""
    for word in words:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


MAX_SERVED_OPTION_WORDS = 64
"""The most words before ``--`` a server reads for a client (``dsh exec``'s options take about 14).

argparse's time grows with the square of the option-like words of a line (10,000 ``--json`` take it
1.8 s, 50,000 take 36 s): a server reading such a line on its one event loop would hold every other
client's command (no keep-alive, so they end 255) for as long. A longer line is the client's to read."""


def read_served(words: Sequence[str]) -> argparse.Namespace | None:
    """A ``dsh exec`` line as ``dsh serve`` reads it for a client: :func:`parse`'s reading, without a word printed.

    None when :func:`parse` would print instead (help: status 0; a usage error: status 2), the line
    names another verb, or it has more than :data:`MAX_SERVED_OPTION_WORDS` words before ``--``: the
    client's own process then reads the line with :func:`parse` and prints what it prints, so help and
    usage errors are the same served or not.
    """
    if list(words[:1]) != ["exec"]:
        return None
    if len(words[: words.index("--") if "--" in words else len(words)]) > MAX_SERVED_OPTION_WORDS:
        return None
    try:
        return parse(words, _silent=True)
    except SystemExit:
        return None


def served_reading(
    words: Sequence[str], deployment: str | None, env: Mapping[str, str], cwd: str
) -> argparse.Namespace | str:
    """How the ``dsh serve`` of ``deployment`` (a path, None for the built-in one) takes the line ``words``
    of a client in ``cwd`` with ``env``: the line read, or why that server does not run it (help, a
    usage error, ``--debug``, ``--no-server``, another deployment), which the client then runs itself.

    The server's rule, and the client's when its server never acknowledged a request: a line the
    server would not run never started there.
    """
    args = read_served(words)
    if args is None:
        return "the line is help, a usage error or not `dsh exec`: the client prints it"
    if args.debug or args.no_server:
        return "--debug and --no-server run in the client's process"
    asked = choose_deployment(args.deployment, env, cwd=cwd).path  # the client's rule, from the client's folder
    if asked != deployment:
        return f"this dsh server serves {_deployment_name(deployment)}, not {_deployment_name(asked)}"
    return args


def _deployment_name(path: str | None) -> str:
    return "the built-in deployment" if path is None else path


@functools.cache
def _silent_parsers(verb: str) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """The silent parser of a built-in verb, built once: a server reads every request with it."""
    return _build(kind=_Silent, only=verb)


def parse(argv: Sequence[str] | None = None, *, _silent: bool = False) -> argparse.Namespace:
    """Parse a ``dsh`` command line; exit 2 with the usage on an invalid one (argparse's way)."""
    words = list(sys.argv[1:] if argv is None else argv)
    word = _verb_word(words)
    commands: dict[str, EntryPointItem] = {}
    if word not in BUILTIN_VERBS:  # `dsh NAME`, `dsh --help`, a typo: only these read the dsh.commands group
        from dsh.core import DshError

        from . import _commands

        commands = _commands.discovered()
        if word is not None and word not in commands and _commands.missing(word) is not None:
            sys.stderr.write(f"dsh: {_commands.missing(word)}\n")
            raise SystemExit(2)
        try:
            parser, exec_parser = _build(commands, word)
        except (DshError, OSError) as exc:  # the verb's distribution failed to load: one line, never a traceback
            sys.stderr.write(f"dsh: {exc}\n")
            raise SystemExit(1) from None
    else:
        parser, exec_parser = _silent_parsers(word) if _silent else _build(only=word)
    args, unknown = parser.parse_known_args(words)
    # argparse reports a verb's unknown option from the top parser, with dsh's usage: the verb's is the useful one.
    owner: argparse.ArgumentParser = vars(args).pop("usage_parser", parser)
    if unknown:
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.verb == "exec":
        assert exec_parser is not None  # built for every line naming exec
        if not command_line(args.command).strip():
            exec_parser.error("a command is needed after --, for example: dsh exec -- 'echo $DSH_SESSION_ID'")
        if args.cwd is not None and args.session is not None:
            exec_parser.error(
                "--cwd applies to a new session; a resumed session (--session) runs in its own recorded directory"
            )
    return args
