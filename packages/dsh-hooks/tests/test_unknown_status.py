"""A hook whose exit status another reaper took: never read as "allowed" at a gate.

Real hooks through the local executor, with SIGCHLD set to SIG_IGN in this process (the "never
leave zombies" idiom any plugin may use), so the kernel reaps the hook's shell before dsh can.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

import pytest

from dsh.bash import LocalExecutor
from dsh.hooks import _claude, _codex
from dsh.hooks._outcome import HookReport
from dsh.hooks._process import run_hook
from dsh.hooks._table import HookCommand
from dsh.hooks.dialect import loaded


@pytest.fixture(autouse=True)
def builtin_dialects() -> Iterator[None]:
    """Claude Code and Codex loaded, as the hooks plugin loads them from their entry points."""
    with loaded(_claude.DIALECT, _codex.DIALECT):
        yield


@pytest.fixture
def children_reaped_elsewhere() -> Iterator[None]:
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGCHLD, previous)


def _run(event: str, command: str) -> HookReport:
    return asyncio.run(run_hook(LocalExecutor(), "claude", event, HookCommand(command), "{}", "/", {}, "Bash"))


@pytest.mark.usefixtures("children_reaped_elsewhere")
@pytest.mark.parametrize("event", ["PreToolUse", "UserPromptSubmit"])
@pytest.mark.parametrize("command", ["exit 0", "exit 2", 'echo \'{"decision": "approve"}\''])
def test_a_gate_hook_whose_status_is_lost_refuses(event: str, command: str) -> None:
    report = _run(event, command)
    assert report.blocked, report
    assert report.reason is not None and "refused to be safe" in report.reason
    assert report.error == "its exit status is unknown: another waitpid() in this process reaped it first"
    assert report.exit_code == 255


@pytest.mark.usefixtures("children_reaped_elsewhere")
@pytest.mark.parametrize("event", ["PostToolUse", "Stop", "SessionStart"])
def test_elsewhere_a_lost_status_is_an_error_that_decides_nothing(event: str) -> None:
    report = _run(event, "exit 2")
    assert not report.blocked and report.error is not None and "exit status is unknown" in report.error


def test_with_the_status_known_the_verdict_is_the_hooks() -> None:
    assert not _run("PreToolUse", "exit 0").blocked
    assert _run("PreToolUse", "echo no >&2; exit 2").blocked
