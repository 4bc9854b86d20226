"""The small parser of the everyday verbs never reads a line differently from the full parser."""

from __future__ import annotations

import contextlib
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh.cli._parser import parse
from dsh.cli._plain import parse_plain

VERBS = [["env"], ["plugins"], ["sessions", "list"], ["sessions", "locate"], ["sessions", "show"], ["sessions"]]
WORDS = [
    "--json", "--deployment", "--session", "--debug", "--help", "-h", "--js", "--dep", "--deployment=",
    "--deployment=d.yaml", "--session=s1", "--session=", "--json=1", "s1", "-x", "d.yaml", "", " ", "--", "list",
    "--version", "--at", "3",
]  # fmt: skip
LINES = st.tuples(st.sampled_from(VERBS), st.lists(st.sampled_from(WORDS), max_size=6)).map(lambda p: [*p[0], *p[1]])


def _full(argv: list[str]) -> object:
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return parse(argv)
    except SystemExit as exc:
        return exc.code


@settings(max_examples=1500, deadline=None)
@given(LINES)
def test_whenever_the_small_parser_answers_the_full_parser_agrees(argv: list[str]) -> None:
    small = parse_plain(argv)
    if small is None:
        return
    full = _full(argv)
    assert not isinstance(full, int | None), f"the small parser accepted {argv}, the full one exits {full}"
    assert vars(small) == vars(full), argv


def test_the_plain_forms_and_what_goes_to_the_full_parser() -> None:
    assert vars(parse_plain(["sessions", "show", "s1", "--json"]) or {}) == vars(
        parse(["sessions", "show", "s1", "--json"])
    )
    assert vars(parse_plain(["env", "--session", "s1"]) or {}) == vars(parse(["env", "--session", "s1"]))
    for handed_on in (
        ["env", "--help"],
        ["env", "--debug"],
        ["--debug", "env"],
        ["sessions", "show"],
        ["sessions", "show", "--json", "s1"],
        ["plugins", "--session", "s1"],
        ["sessions", "fork", "s1"],
        ["exec", "--", "true"],
    ):
        assert parse_plain(handed_on) is None, handed_on
