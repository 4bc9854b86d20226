"""Verbs other distributions add (the ``dsh.commands`` group): listed lazily, imported only to run."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.cli import _commands
from dsh.cli._cli import dispatch
from dsh.cli._parser import BUILTIN_VERBS, parse
from dsh.testing import make_dist

FROB = """
import sys

class Frob:
    def configure(self, parser):
        parser.add_argument("--times", type=int, default=1)

    def run(self, args):
        print("frob " * args.times + (args.choice.path or "built-in"))
        return 3

command = Frob()
"""


def _install(site: Path, name: str = "dsh-frob", source: str = FROB, verb: str = "frob") -> None:
    make_dist(site, name, "0.3", {"dsh.commands": {verb: "frob_cmd:command"}}, {"frob_cmd": source})
    # make_dist writes no Summary: add the one line `dsh --help` shows for the verb.
    info = site / f"{name.replace('-', '_')}-0.3.dist-info"
    (info / "METADATA").write_text((info / "METADATA").read_text() + "Summary: Frobs the session.\n")


def _parse(argv: list[str]) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result: object = parse(argv)
        except SystemExit as exc:
            result = exc.code
    return result, out.getvalue(), err.getvalue()


def test_an_installed_verb_is_listed_without_being_imported_and_runs_through_dispatch(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(site)
    code, out, _ = _parse(["--help"])
    assert code == 0 and "frob" in out and "Frobs the session (dsh-frob)" in out
    assert "frob_cmd" not in sys.modules  # help reads the distribution's metadata, never its code
    args, _, _ = _parse(["frob", "--times", "2"])
    assert "frob_cmd" in sys.modules
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    out_buffer = io.StringIO()
    with contextlib.redirect_stdout(out_buffer):
        assert dispatch(args) == 3  # type: ignore[arg-type]
    assert out_buffer.getvalue() == "frob frob built-in\n"


def test_a_built_in_verb_never_reads_the_group(site: Path) -> None:
    _install(site, verb="env")  # a distribution claiming a built-in name
    args, _, _ = _parse(["env"])
    assert getattr(args, "plugin_command", None) is None and "frob_cmd" not in sys.modules
    code, _, err = _parse(["nope"])  # argparse names every verb it has: the built-in ones first, env once
    choices = ", ".join(repr(v) for v in BUILTIN_VERBS)
    assert code == 2 and f"invalid choice: 'nope' (choose from {choices}" in err and err.count("'env'") == 1
    assert "frob_cmd" not in sys.modules


def test_a_known_verb_whose_distribution_is_missing_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_commands, "KNOWN_COMMANDS", {"frob": "dsh-frob"})
    code, out, err = _parse(["frob", "--times", "2"])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dsh: `dsh frob` comes with the dsh-frob distribution")
    assert "install dsh-frob" in err
    _, listed, _ = _parse(["--help"])
    assert "install dsh-frob to use it (not installed)" in listed


def test_the_mcp_verb_is_known_as_dsh_mcps() -> None:
    assert _commands.KNOWN_COMMANDS == {"mcp": "dsh-mcp"}
    assert _commands.missing("nope") is None


def test_a_verb_that_fails_to_import_is_one_line_naming_its_distribution(site: Path) -> None:
    _install(site, source="raise SystemExit(4)\n")
    code, _, err = _parse(["frob"])
    assert code == 1
    assert err.count("\n") == 1 and "entry point 'frob' in group 'dsh.commands'" in err and "dsh-frob 0.3" in err


def test_an_object_that_is_no_command_is_refused_naming_the_entry_point(site: Path) -> None:
    _install(site, source="command = 42\n")
    code, _, err = _parse(["frob"])
    assert code == 1 and "is not a dsh command: it needs configure(parser) and run(args)" in err


def test_the_real_command_runs_an_installed_verb(site: Path, tmp_path: Path) -> None:
    _install(site)
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-m", "dsh.cli", "frob"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (3, "frob built-in\n"), done.stderr


def test_a_verb_that_raises_a_bug_is_one_line_naming_its_distribution(site: Path, tmp_path: Path) -> None:
    """Issue 40 (what dsh does when a plugin misbehaves): a third party's bug was a traceback."""
    _install(site, source=FROB.replace('print("frob "', 'print({}["missing"]'))
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home"), "PYTHONPATH": str(site)}
    for extra, lines in (([], 1), (["--debug"], None)):
        done = subprocess.run(
            [sys.executable, "-m", "dsh.cli", "frob", *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1
        assert done.stderr.endswith(
            "dsh: `dsh frob` (dsh-frob 0.3) failed: KeyError: 'missing'; this is a fault of that distribution "
            "(--debug shows where)\n"
        )
        if lines is not None:
            assert done.stderr.count("\n") == lines
        else:
            assert "Traceback" in done.stderr and "frob_cmd.py" in done.stderr
