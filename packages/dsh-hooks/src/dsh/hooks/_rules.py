"""Claude Code permission rules as the ``if`` field of a hook uses them: ``Tool`` or ``Tool(pattern)``.

``Bash(git *)`` matches a Bash call any of whose simple commands is ``git`` or starts with ``git ``;
``*`` is a wildcard anywhere, a trailing ``:*`` is the older prefix form. The simple commands of a
line come from a real shell parser (tree-sitter's bash grammar): every command of a list, pipeline,
subshell, compound command, ``$(...)``, backticks and process substitution, with leading
assignments dropped, quoting and backslashes removed from the command's name, and the words after a
wrapper (``env``, ``command``, ``sudo``, ...) tried as commands too. A rule is a guard's filter, so a
line the parser cannot read with certainty (a syntax error, a command name built by an expansion,
``eval``, ``bash -c``) matches: the hook runs. ``Agent(Explore)`` matches the subagent type; for
other tools the pattern is a glob against ``tool_input.file_path``.
"""

import fnmatch
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_RULE = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*", re.DOTALL)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*\s+")


class Rule(NamedTuple):
    """A parsed permission rule."""

    tool: str
    pattern: str | None


def parse_rule(text: str) -> Rule | None:
    """The rule, or None when ``text`` is not a permission rule."""
    match = _RULE.fullmatch(text)
    if match is None:
        return None
    return Rule(match.group(1), match.group(2))


WRAPPERS = frozenset(
    {
        # run the command in their arguments (options and their values are skipped as words)
        *("env", "command", "builtin", "exec", "coproc", "nohup", "nice", "time", "timeout", "stdbuf"),
        *("sudo", "doas", "runuser", "sg", "chroot", "unshare", "nsenter", "setsid", "flock", "ionice"),
        *("chrt", "taskset", "strace", "ltrace", "valgrind", "fakeroot", "firejail", "proot", "systemd-run"),
        *("unbuffer", "catchsegv", "busybox", "xargs", "parallel"),
    }
)
"""Commands that run a command given in their arguments: each later word is tried as a command too
(``find``'s ``-exec`` and its kin start one at the next word). A list can never be complete: a
rule is a filter that saves running a hook, never the guard itself (the package README)."""

OPAQUE = frozenset(
    {
        *("eval", "source", ".", "bash", "sh", "zsh", "dash", "ksh", "mksh", "fish", "su", "script", "watch"),
        *("trap", "mapfile", "readarray", "ssh", "alias", "hash", "enable", "let"),
    }
)
"""Commands that run command text the parser does not see (a string, a file, a callback, another
host's shell): a line naming one is never certain, so the rule matches."""

_GLOB = re.compile(r"(?<!\\)[*?\[]")
_SUBSTITUTION = re.compile(r"\$\((?!\()|`")
"""A command substitution's opening: text bash may run later (an arithmetic subscript, ``PS4``,
``${x@P}``) even where it is quoted, so the parser's count of substitutions must account for each."""

_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})

_NODES_COMMAND = frozenset({"command", "declaration_command", "unset_command"})


class Uncertain(Exception):
    """The line cannot be read with certainty (a rule then matches: the guard runs)."""


@functools.cache
def _bash_parser() -> "Parser":
    # Imported on first use: only a hook with a Bash ``if`` rule, at a tool event, pays for it.
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def _plain(word: str) -> str:
    """A command name as the shell would look it up: quotes and backslashes removed. A name the
    shell would expand (``$``, backticks, a glob's ``*?[``) is never certain."""
    if "$" in word or "`" in word or (_GLOB.search(word) and word != "["):  # `[` is test, not a glob
        raise Uncertain(word)
    return re.sub(r"\\(.)|['\"]", lambda m: m.group(1) or "", word)


def _forms(name: str, rest: Sequence[str]) -> Iterator[str]:
    """A simple command as written and, when its name is a path (``/bin/rm``), by the file's name:
    the program a rule names runs either way."""
    yield " ".join([name, *rest])
    base = name.rpartition("/")[2]
    if base and base != name:
        yield " ".join([base, *rest])


def _simple(node: "Node") -> Iterator[str]:
    """The texts one command node may be matched as: itself and, after a wrapper, each rest."""
    if node.type != "command":
        yield _text(node)
        return
    name_node = node.child_by_field_name("name")
    if name_node is None:  # assignments alone
        return
    words = [_plain(_text(name_node)), *(_text(a) for a in node.children_by_field_name("argument"))]
    yield from _forms(words[0], words[1:])
    program = words[0].rpartition("/")[2]
    if program in OPAQUE:
        raise Uncertain(words[0])
    if program == "env" and any(w.startswith(("-S", "--split-string")) for w in words[1:]):
        raise Uncertain(words[0])  # a command line in one option word
    if program == "find":
        starts = [i + 1 for i, word in enumerate(words[:-1]) if word in _FIND_ACTIONS]
        for start in starts:
            head = _plain(words[start])
            yield from _forms(head, words[start + 1 :])
            if head.rpartition("/")[2] in OPAQUE:
                raise Uncertain(head)
        return
    if program not in WRAPPERS:
        return
    # Options and their values are not told apart: every later word is tried as the command's
    # name (matching more often is the guard's safe side); the first that is no option and no
    # assignment is certainly one, so an expansion there cannot be read.
    named = False
    for start in range(1, len(words)):
        word = words[start]
        if word.startswith("-"):
            continue
        try:
            head = _plain(word)
        except Uncertain:
            if not named:
                raise
            continue
        named = named or _ASSIGNMENT.match(word + " ") is None
        yield from _forms(head, words[start + 1 :])
        if head.rpartition("/")[2] in OPAQUE:
            raise Uncertain(head)


def _text(node: "Node") -> str:
    return (node.text or b"").decode(errors="replace")


def simple_commands(line: str) -> list[str]:
    """Every simple command of a bash ``line`` (see the module docstring); :class:`Uncertain` when unsure."""
    # A backslash-newline joins two lines into one word for bash (``r\\<newline>m`` is ``rm``); the
    # grammar reads it as a space. surrogateescape: bytes that were not UTF-8 go back as bytes.
    line = line.replace("\\\n", "")
    tree = _bash_parser().parse(line.encode("utf-8", "surrogateescape"))
    if tree.root_node.has_error:
        raise Uncertain(line)
    found: list[str] = []
    parsed = 0
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in _NODES_COMMAND:
            found.extend(_simple(node))
        elif node.type == "command_substitution":
            parsed += 1 + _text(node).startswith("`")  # a backtick pair is two openings
        stack.extend(reversed(node.children))
    if len(_SUBSTITUTION.findall(line)) > parsed:  # one the parser read as text: bash may still run it
        raise Uncertain(line)
    return found


def _split_commands(command: str) -> list[str]:
    """Subcommands of a PowerShell line, split outside quotes at control operators."""
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(command):
        ch = command[i]
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"' and i + 1 < len(command):
                current.append(command[i + 1])
                i += 1
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch == "\\" and i + 1 < len(command):
            current.extend(command[i : i + 2])
            i += 1
        elif ch in ";|&\n":
            parts.append("".join(current))
            current = []
            if i + 1 < len(command) and command[i + 1] == ch and ch in "|&":
                i += 1
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    cleaned = []
    for part in parts:
        part = part.strip()
        while True:
            assignment = _ASSIGNMENT.match(part)
            if assignment is None:
                break
            part = part[assignment.end() :]
        if part:
            cleaned.append(part)
    return cleaned


def _command_pattern(pattern: str) -> re.Pattern[str]:
    if pattern.endswith(":*"):
        prefix = re.escape(pattern[:-2])
        return re.compile(rf"{prefix}(\s.*)?", re.DOTALL)
    body = pattern
    optional_tail = body.endswith(" *")
    if optional_tail:
        body = body[:-2]
    regex = ".*".join(re.escape(piece) for piece in body.split("*"))
    if optional_tail:
        regex += r"(\s.*)?"
    return re.compile(regex, re.DOTALL)


def rule_matches(rule: Rule, tool_names: Sequence[str], tool_input: Mapping[str, Any]) -> bool:
    """Whether a call of a tool known by ``tool_names`` (peer names) with ``tool_input`` matches."""
    if rule.tool not in tool_names:
        return False
    if rule.pattern is None or rule.pattern in ("", "*"):
        return True
    command = tool_input.get("command")
    if isinstance(command, str) and rule.tool in ("Bash", "PowerShell"):
        regex = _command_pattern(rule.pattern.strip())
        if rule.tool == "PowerShell":
            return any(regex.fullmatch(part) for part in _split_commands(command))
        try:
            return any(regex.fullmatch(part) for part in simple_commands(command))
        except Uncertain:
            return True
    subagent = tool_input.get("subagent_type", tool_input.get("agent_type"))
    if isinstance(subagent, str) and rule.tool in ("Agent", "Task"):
        return fnmatch.fnmatchcase(subagent, rule.pattern)
    path = tool_input.get("file_path", tool_input.get("path"))
    if isinstance(path, str):
        return fnmatch.fnmatchcase(path, rule.pattern) or fnmatch.fnmatchcase(path, f"*/{rule.pattern}")
    return False
