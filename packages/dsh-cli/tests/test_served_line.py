"""One parser reads a ``dsh exec`` line, served or not: the server reads it as ``parse`` does, silently,
and the client's one look at its words (``--no-server`` before ``--``) never skips a server the parser would ask."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh.cli._parser import command_line, parse, read_served
from dsh.cli_fast._client import _bypasses_server

WORDS = [
    "exec", "--", "--json", "--session", "--cwd", "--timeout", "--deployment", "--no-server", "--no-s", "--debug",
    "--help", "-h", "--js", "--session=s1", "--timeout=5", "--timeout=-1", "--cwd=/tmp", "5", "0", "inf", "x",
    "-x", "echo hi", " ", "", "s1", "/tmp", "d.yaml", "--version", "env",
]  # fmt: skip
LINES = st.tuples(
    st.lists(st.sampled_from(WORDS), max_size=6), st.booleans(), st.lists(st.sampled_from(WORDS), max_size=3)
).map(lambda parts: ["exec", *parts[0], *(["--"] if parts[1] else []), *parts[2]])


def _parsed(argv: list[str]) -> object:
    """What ``parse`` makes of ``argv``: its reading, or the exit status it stops with (its output swallowed)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return parse(argv)
    except SystemExit as exc:
        return exc.code


@settings(max_examples=500, deadline=None)
@given(LINES)
def test_the_server_reads_a_line_as_the_client_would_and_prints_nothing(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        served = read_served(argv)
    assert (out.getvalue(), err.getvalue()) == ("", "")
    local = _parsed(argv)
    if served is None:
        assert isinstance(local, int | None), f"the server refused {argv}, which parses as {local}"
    else:
        assert vars(served) == vars(local), argv


@settings(max_examples=500, deadline=None)
@given(LINES)
def test_the_word_no_server_the_client_looks_for_is_the_option_or_a_command_word(argv: list[str]) -> None:
    """Never an option's value: when it is one of the command's words (``dsh exec echo --no-server``,
    no ``--``), the client asks the server once the parser read the line (``main``)."""
    parsed = _parsed(argv)
    if _bypasses_server(argv) and not isinstance(parsed, int | None):
        assert parsed.no_server or "--no-server" in parsed.command, argv  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "argv",
    [["exec", "--help"], ["exec", "--"], ["exec", "--", " "], ["exec", "--timeout", "0", "--", "true"], ["env"]],
)
def test_help_usage_errors_and_other_verbs_are_the_client_s_to_print(argv: list[str]) -> None:
    assert read_served(argv) is None


def test_a_served_line_is_read_whole() -> None:
    args = read_served(["exec", "--json", "--session", "s1", "--timeout=2.5", "--", "printf", "%s", "a b"])
    assert args is not None
    assert (args.json, args.session, args.timeout, args.debug) == (True, "s1", 2.5, False)
    assert command_line(args.command) == "printf %s 'a b'"
