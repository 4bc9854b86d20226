"""The loop library depends on no hook dialect, no shell parser and no executor (issue 40 item 2).

Hook points are a seam of the loop (``dsh.agent.HOOKS`` and the ``LoopHooks`` protocol) that a hooks
distribution plugs into; an interruption is read through ``dsh.paths.interrupts``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import requires

FORBIDDEN = ("dsh-hooks", "dsh-bash", "tree-sitter")
"""Distribution names (prefixes) dsh-agent must not require: hook dialects, executors, parsers."""


def test_the_distribution_requires_no_dialect_executor_or_parser() -> None:
    names = [re.split(r"[=<>!~;\[ ]", line, maxsplit=1)[0] for line in requires("dsh-agent") or []]
    assert names and not [n for n in names if n.startswith(FORBIDDEN)], names


def test_importing_the_loop_loads_none_of_them() -> None:
    probe = (
        "import json, sys\nimport dsh.agent\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('dsh.hooks', 'dsh.bash', 'tree_sitter')))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_the_hook_seam_is_the_loops_own() -> None:
    import dsh.agent
    from dsh.agent import _hookseam

    for name in ("LoopHooks", "HookVerdict", "HookRecord", "HookScope", "Notice"):
        assert getattr(dsh.agent, name).__module__ == "dsh.agent._hookseam", name
    assert dsh.agent.HOOKS is _hookseam.HOOKS and dsh.agent.HOOKS.name == "hooks"
