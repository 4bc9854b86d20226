"""The words of ``dsh exec``: a small parser for its plain form, and the shell line its command words make.

:func:`parse_exec` reads only what the served fast path needs and recognises only the exact
spellings of ``dsh exec``'s own options, each followed by ``--`` and a command. Anything else (help,
an abbreviation, an unknown or repeated-with-error option, a missing command, ``--debug``)
gives None, and the caller hands the line to the full parser (``_parser``), which
owns help, usage errors and exit status 2. A property test checks that whenever this parser answers,
the full parser reads the line the same way.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from collections.abc import Sequence

    from dsh.paths.deployment import DeploymentChoice

_VALUED = {"--deployment": "deployment", "--session": "session", "--cwd": "cwd", "--timeout": "timeout"}


class ExecArgs:
    """``dsh exec``'s options with the attribute names of the full parser's, so a plain line skips argparse.

    The served client sends them; without a server the in-process ``dsh exec`` runs them as they are.
    """

    __slots__ = ("choice", "command", "cwd", "debug", "deployment", "json", "no_server", "session", "timeout")

    verb = "exec"
    choice: DeploymentChoice
    """Which deployment runs it: set by the caller with :func:`dsh.paths.deployment.choose_deployment`."""

    def __init__(self) -> None:
        self.debug = False
        self.no_server = False
        self.deployment: str | None = None
        self.session: str | None = None
        self.cwd: str | None = None
        self.timeout: float | None = None
        self.json = False
        self.command: list[str] = []
        """The words from ``--`` on, as the full parser keeps them."""


def seconds(text: str) -> float | None:
    """``--timeout`` and ``--idle-timeout``: the positive, finite number of seconds ``text`` is; else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None


def valued_option(words: Sequence[str], i: int) -> tuple[str, str, int] | None:
    """``--name=value`` or ``--name value`` at ``words[i]``: name, value and the index after it.

    None when argparse must decide: a missing value, one that looks like an option, an empty one
    (the full path says what it means: ``--session ''`` is an error). Both small parsers read
    options with this one rule.
    """
    name, equals, value = words[i].partition("=")
    if not equals:
        if i + 1 == len(words) or words[i + 1].startswith("-"):
            return None
        value, i = words[i + 1], i + 1
    return (name, value, i + 1) if value else None


def parse_exec(argv: Sequence[str]) -> ExecArgs | None:
    """``dsh exec [OPTIONS] -- COMMAND...`` in its plain spellings; None for anything else."""
    if not argv or argv[0] != "exec":
        return None
    args = ExecArgs()
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            if i + 1 == len(argv) or (i + 2 == len(argv) and not argv[i + 1].strip()):
                return None  # no command (or a blank one): the full parser says so, with exit status 2
            args.command = list(argv[i:])
            break
        if word in ("--json", "--no-server"):
            setattr(args, word[2:].replace("-", "_"), True)
            i += 1
            continue
        read = valued_option(argv, i)
        field = None if read is None else _VALUED.get(read[0])
        if read is None or field is None:
            return None
        _, value, i = read
        if field == "timeout":
            timeout = seconds(value)
            if timeout is None:
                return None
            args.timeout = timeout
        else:
            setattr(args, field, value)
    else:
        return None  # no `--`: the full parser reads the rest as the command, or complains
    if args.cwd is not None and args.session is not None:
        return None  # refused as a usage error by the full parser
    return args


def command_words(words: Sequence[str]) -> list[str]:
    """The command's own words: what follows the ``--`` the parsers keep in front of them."""
    words = list(words)
    return words[1:] if words[:1] == ["--"] else words


def command_line(words: Sequence[str]) -> str:
    """The shell command line of ``dsh exec -- WORDS``.

    One word is a command line as typed; several are argv words, quoted so the shell sees them as
    given (so ``dsh exec -- dsh exec -- 'echo $X'`` expands ``$X`` in the inner shell).
    """
    words = command_words(words)
    if not words:
        return ""
    if len(words) == 1:
        return words[0]
    import shlex  # only for several words, and never in the served client: the server joins them

    return shlex.join(words)
