"""dsh's library log: silent or shown as the dsh command asks."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> subprocess.CompletedProcess[str]:
    # A fresh interpreter each time: logging's configuration is process-wide.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)


@pytest.mark.parametrize(("debug", "shown"), [(False, False), (True, True)])
def test_the_command_shows_the_library_log_only_with_debug(debug: bool, shown: bool) -> None:
    done = _run(
        "from dsh.paths.log import configure_command, logger; "
        f"configure_command(debug={debug}); logger('dsh.test').warning('a warning %s', 1)"
    )
    assert ("dsh: dsh.test: a warning 1" in done.stderr) is shown


def test_without_the_command_logging_keeps_its_own_defaults() -> None:
    # A program embedding dsh did not ask for silence: a warning reaches stderr as logging does by default.
    done = _run("from dsh.paths.log import logger; logger('dsh.test').warning('plain warning')")
    assert done.stderr == "plain warning\n"


def test_a_program_s_own_logging_configuration_wins() -> None:
    done = _run(
        "import logging, sys; logging.basicConfig(stream=sys.stdout, format='mine: %(message)s'); "
        "from dsh.paths.log import configure_command, logger; configure_command(debug=False); "
        "logger('dsh.test').warning('kept')"
    )
    assert done.stdout == "mine: kept\n"


@pytest.mark.parametrize(("debug", "shown"), [(False, False), (True, True)])
def test_an_adopted_library_logger_with_its_own_level_follows_the_command(debug: bool, shown: bool) -> None:
    # As psycopg does: its logger set to WARNING, which a root level alone would not silence.
    done = _run(
        "import logging; logging.getLogger('lib').setLevel(logging.WARNING); "
        "from dsh.paths.log import adopt, configure_command; "
        f"configure_command(debug={debug}); adopt('lib'); logging.getLogger('lib.pool').warning('discarding')"
    )
    assert ("dsh: lib.pool: discarding" in done.stderr) is shown
    assert ("discarding" in done.stderr) is shown


def test_adopting_outside_the_command_changes_nothing() -> None:
    done = _run(
        "import logging; logging.getLogger('lib').setLevel(logging.WARNING); "
        "from dsh.paths.log import adopt; adopt('lib'); logging.getLogger('lib').warning('as before')"
    )
    assert done.stderr == "as before\n"


WARN = "import warnings; warnings.warn('a library is deprecated', UserWarning)"


@pytest.mark.parametrize(("debug", "shown"), [(False, False), (True, True)])
def test_captured_warnings_are_the_log_s_those_held_before_first(debug: bool, shown: bool) -> None:
    done = _run(
        "from dsh.paths.log import capture_warnings, configure_command; "
        f"configure_command(debug={debug}); capture_warnings(['held: a library is deprecated']); {WARN}"
    )
    if shown:
        lines = [line for line in done.stderr.splitlines() if line.startswith("dsh: py.warnings: ")]
        assert len(lines) == 2 and lines[0] == "dsh: py.warnings: held: a library is deprecated"
        assert "UserWarning: a library is deprecated" in lines[1]
    else:
        assert done.stderr == ""


def test_a_warning_shown_to_a_file_the_caller_names_goes_there() -> None:
    done = _run(
        "import sys, warnings; from dsh.paths.log import capture_warnings, configure_command; "
        "configure_command(debug=False); capture_warnings(); "
        "warnings.showwarning('named', UserWarning, 'f.py', 1, file=sys.stdout)"
    )
    assert "UserWarning: named" in done.stdout and done.stderr == ""


def test_the_warnings_filters_stay_python_s() -> None:
    """``-W error`` still turns a warning into an exception: only where a shown warning goes changes."""
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-c",
            f"from dsh.paths.log import capture_warnings; capture_warnings(); {WARN}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "UserWarning: a library is deprecated" in done.stderr


def test_without_the_command_warnings_go_where_python_sends_them() -> None:
    assert "UserWarning: a library is deprecated" in _run(f"import dsh.paths.log; {WARN}").stderr
