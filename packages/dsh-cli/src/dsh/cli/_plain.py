"""The plain forms of the everyday read-only verbs, read without argparse.

``dsh env``, ``dsh plugins``, ``dsh sessions list`` and ``dsh sessions show|locate ID``, each with
only the exact spellings of ``--json``, ``--deployment FILE`` and (for ``env``) ``--session ID``,
give the namespace the full parser would give; anything else (help, ``--debug``, an abbreviation,
a missing or odd value, an option before the ID) gives None, and the full parser (``_parser``) reads
the line, so help, usage errors and exit status 2 stay its own. Importing and building argparse's
parser is about a tenth of a cold ``dsh env``. A property test checks the two parsers agree.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from ._exec_argv import valued_option

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

_VALUED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("env",): ("--deployment", "--session"),
    ("plugins",): ("--deployment",),
    ("sessions", "list"): ("--deployment",),
    ("sessions", "locate"): ("--deployment",),
    ("sessions", "show"): ("--deployment",),
}
"""Each plain verb and the options with a value it takes; every one also takes ``--json``."""

_WITH_ID = {("sessions", "locate"), ("sessions", "show")}


def parse_plain(argv: Sequence[str]) -> argparse.Namespace | None:
    """The full parser's reading of a plain read-only verb line; None for anything else."""
    words = list(argv)
    verb = next((v for v in _VALUED if tuple(words[: len(v)]) == v), None)
    if verb is None:
        return None
    rest = words[len(verb) :]
    values: dict[str, object] = {"version": None, "debug": False, "verb": verb[0], "deployment": None, "json": False}
    if len(verb) == 2:
        values["action"] = verb[1]
    if "--session" in _VALUED[verb]:
        values["session"] = None
    if verb in _WITH_ID:
        if not rest or not rest[0] or rest[0].startswith("-"):
            return None
        values["id"] = rest.pop(0)
    i = 0
    while i < len(rest):
        if rest[i] == "--json":
            values["json"] = True
            i += 1
            continue
        read = valued_option(rest, i)
        if read is None or read[0] not in _VALUED[verb]:
            return None
        name, value, i = read
        values[name[2:]] = value
    return cast("argparse.Namespace", SimpleNamespace(**values))
