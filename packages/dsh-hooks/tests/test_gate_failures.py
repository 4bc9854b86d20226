"""At a gate, a hook dsh could not start or could not read refuses; a hook that ran and failed does not.

Real hooks through the hooks' own executor: long decisions (issue 21, item 2), hooks that could not be
started for want of file descriptors under a real ``RLIMIT_NOFILE``, or whose command or interpreter is
missing (item 5).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.hooks import _claude, _codex
from dsh.hooks._outcome import HookOutcome, HookReport
from dsh.hooks._process import HOOK_OUTPUT_LIMIT, hook_executor, run_hook
from dsh.hooks._table import Dialect, HookCommand
from dsh.hooks.dialect import loaded


@pytest.fixture(autouse=True)
def builtin_dialects() -> Iterator[None]:
    """Claude Code and Codex loaded, as the hooks plugin loads them from their entry points."""
    with loaded(_claude.DIALECT, _codex.DIALECT):
        yield


def _run(tmp_path: Path, event: str, hook: HookCommand, dialect: Dialect = "claude") -> HookReport:
    executor = hook_executor(spill_dir=tmp_path / "output")
    return asyncio.run(run_hook(executor, dialect, event, hook, "{}", str(tmp_path), {}, "bash"))


def _printing(tmp_path: Path, document: object) -> HookCommand:
    path = tmp_path / "decision.json"
    path.write_text(json.dumps(document))
    return HookCommand(f"cat {path}")


@pytest.mark.parametrize("dialect", ["claude", "codex"])
def test_a_deny_far_longer_than_a_shell_result_is_read_whole(tmp_path: Path, dialect: Dialect) -> None:
    reason = "no: " + "x" * 31_000
    deny = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
    report = _run(tmp_path, "PreToolUse", _printing(tmp_path, deny), dialect)
    assert report.blocked and report.reason == reason and report.error is None


@pytest.mark.parametrize("dialect", ["claude", "codex"])
def test_a_long_updated_input_replaces_the_call(tmp_path: Path, dialect: Dialect) -> None:
    command = "echo " + "y" * 31_000
    rewrite = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"command": command},
        }
    }
    report = _run(tmp_path, "PreToolUse", _printing(tmp_path, rewrite), dialect)
    assert report.updated_input == {"command": command}


def test_stdout_past_the_bound_refuses_at_a_gate_and_decides_nothing_elsewhere(tmp_path: Path) -> None:
    # A valid "allow" padded past the bound: dsh cannot read it whole, so it cannot take it as an allow.
    allow = {"decision": "approve", "reason": "z" * HOOK_OUTPUT_LIMIT}
    hook = _printing(tmp_path, allow)
    gate = _run(tmp_path, "PreToolUse", hook)
    assert gate.blocked and gate.reason is not None and "refused to be safe" in gate.reason
    assert gate.error is not None and f"more than the {HOOK_OUTPUT_LIMIT} characters" in gate.error
    after = _run(tmp_path, "PostToolUse", _printing(tmp_path, {"decision": "block", "reason": "z" * HOOK_OUTPUT_LIMIT}))
    assert not after.blocked and after.error is not None


@pytest.mark.parametrize(
    "hook",
    [
        HookCommand("/nonexistent/guard.sh", args=()),  # the exec form's command is missing
        HookCommand("python-that-is-not-installed ~/.claude/hooks/guard.py"),  # the interpreter it names
    ],
    ids=["exec-form", "interpreter"],
)
def test_a_gate_hook_that_could_not_start_refuses(tmp_path: Path, hook: HookCommand) -> None:
    report = _run(tmp_path, "PreToolUse", hook)
    assert report.blocked and report.exit_code == 127
    assert report.reason is not None and "could not start" in report.reason and hook.command in report.reason
    elsewhere = _run(tmp_path, "PostToolUse", hook)
    assert not elsewhere.blocked and elsewhere.error is not None


def test_a_script_whose_interpreter_is_missing_refuses(tmp_path: Path) -> None:
    script = tmp_path / "guard.sh"
    script.write_text("#!/nonexistent/interpreter\nexit 0\n")
    script.chmod(0o700)
    assert _run(tmp_path, "UserPromptSubmit", HookCommand(str(script))).blocked


def test_a_hook_that_ran_and_failed_keeps_the_non_blocking_rule(tmp_path: Path) -> None:
    report = _run(tmp_path, "PreToolUse", HookCommand("echo broken >&2; exit 1"))
    assert not report.blocked and report.error is not None and "status 1" in report.error


STARVED = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from dsh.hooks import _claude
    from dsh.hooks._dialect import register_dialect
    from dsh.hooks._outcome import HookOutcome
    from dsh.hooks._process import hook_executor, run_hook
    from dsh.hooks._table import HookCommand

    register_dialect(_claude.DIALECT)  # as the hooks plugin does for each dsh.hook_dialects entry
    resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
    executor = hook_executor(spill_dir=sys.argv[1])
    # Many guards that allow, and a last one that denies everything.
    hooks = [HookCommand(f"exit 0 # {i}") for i in range(int(sys.argv[2]))]
    hooks.append(HookCommand("echo 'no, never' >&2; exit 2"))

    async def main():
        jobs = [run_hook(executor, "claude", "PreToolUse", h, "{}", "/", {}, "bash") for h in hooks]
        return HookOutcome(tuple(await asyncio.gather(*jobs)))

    outcome = asyncio.run(main())
    print(json.dumps({
        "blocked": outcome.blocked,
        "failed": [r.error for r in outcome.failures],
        "denied": [r.command for r in outcome.reports if r.blocked and r.error is None],
    }))
    """
)


def test_guards_starved_of_file_descriptors_refuse(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", STARVED, str(tmp_path / "output"), "120"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    starved = [e for e in result["failed"] if "Too many open files" in e]
    assert starved, result  # the limit really starved some hooks
    assert result["blocked"], result


def test_an_outcome_of_hooks_that_could_not_run_is_blocked() -> None:
    # The merge keeps a refusal from a hook that never started even when every other hook allowed.
    allowed = HookReport("claude", "PreToolUse", "ok", 0, "", "")
    refused = HookReport("claude", "PreToolUse", "x", None, "", "", error="could not run", blocked=True, reason="r")
    assert HookOutcome((allowed, refused)).blocked
