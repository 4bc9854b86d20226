"""The served client's small ``dsh exec`` parser never reads a line differently from the full parser."""

from __future__ import annotations

import contextlib
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh.cli._fast._exec_argv import command_line, parse_exec
from dsh.cli._parser import parse

WORDS = [
    "exec", "--", "--json", "--session", "--cwd", "--timeout", "--deployment", "--no-server", "--debug",
    "--help", "-h", "--js", "--sess", "--session=", "--session=s1", "--session=-x", "--timeout=5", "--timeout=-1",
    "--timeout=nan", "--cwd=/tmp", "--deployment=d.yaml", "--json=1", "5", "0", "1e3", "inf", "-5", "x",
    "-x", "echo hi", " ", "", "s1", "/tmp", "d.yaml", "--version", "env", "run",
]  # fmt: skip
VALUED = ["--session", "--cwd", "--timeout", "--deployment"]
# Mostly lines of the plain shape (options, `--`, a command), so the interesting cases come often.
LINES = st.tuples(
    st.lists(st.sampled_from(WORDS) | st.sampled_from(VALUED), max_size=6),
    st.booleans(),
    st.lists(st.sampled_from(WORDS), max_size=3),
).map(lambda parts: ["exec", *parts[0], *(["--"] if parts[1] else []), *parts[2]])


def _full(argv: list[str]) -> object:
    """What the full parser makes of ``argv``: its reading, or the exit status it stops with."""
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return parse(argv)
    except SystemExit as exc:
        return exc.code


@settings(max_examples=1000, deadline=None)
@given(LINES)
def test_whenever_the_small_parser_answers_the_full_parser_agrees(argv: list[str]) -> None:
    small = parse_exec(argv)
    if small is None:
        return  # the full parser takes the line: help, usage errors and all
    full = _full(argv)
    assert not isinstance(full, int | None), f"the small parser accepted {argv}, the full one exits {full}"
    fields = ("deployment", "session", "cwd", "timeout", "json", "no_server", "command", "verb", "debug")
    assert {f: getattr(small, f) for f in fields} == {f: getattr(full, f) for f in fields}, argv
    assert not full.debug
    assert command_line(small.command).strip()


def test_the_plain_forms_are_read_without_the_full_parser() -> None:
    args = parse_exec(["exec", "--json", "--session", "s1", "--timeout=2.5", "--", "printf", "%s", "a b"])
    assert args is not None
    assert (args.json, args.session, args.timeout, args.command) == (True, "s1", 2.5, ["--", "printf", "%s", "a b"])
    no_server = parse_exec(["exec", "--no-server", "--", "true"])
    assert no_server is not None and no_server.no_server and not no_server.json
    for handed_on in (
        ["exec", "--help"],
        ["exec", "--"],
        ["exec", "--", " "],
        ["exec", "echo", "hi"],
        ["exec", "--debug", "--", "true"],
        ["exec", "--cwd", "/tmp", "--session", "s1", "--", "true"],
        ["exec", "--timeout", "0", "--", "true"],
        ["--debug", "exec", "--", "true"],
    ):
        assert parse_exec(handed_on) is None, handed_on
