"""No module outside a hook dialect names a dialect or a peer's variable (issue 40 item 1).

A dialect is a plugin (``dsh.hook_dialects``): the names of the peers it speaks for (``claude``,
``codex``, ``gemini``), their hooks files and their environment variables (``CLAUDE_*``, ``CODEX_*``,
``GEMINI_*``) are constants of its own module. Everything else asks the loaded dialects.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO

PEER_NAME = re.compile(r"^(claude|codex|gemini)(\.json)?$|^(CLAUDE|CODEX|GEMINI)_[A-Z_]+$", re.IGNORECASE)
"""A dialect's name or hooks file, or a peer's environment variable, as a whole string."""

HOOK_DISTRIBUTIONS = ("dsh-hooks", "dsh-hooks-gemini")
"""Where the dialects live (dsh-hooks' own stage modules are held to the same rule by its tests)."""


def _named(source: Path) -> list[str]:
    tree = ast.parse(source.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        f"{source.relative_to(REPO)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and PEER_NAME.match(node.value)
    ]


def test_the_pattern_catches_what_the_hard_wired_modules_held() -> None:
    for literal in ("claude", "codex", "gemini", "codex.json", "CLAUDE_CODE_SESSION_ID", "GEMINI_PROJECT_DIR"):
        assert PEER_NAME.match(literal), literal
    assert not PEER_NAME.match("claude-sonnet-4-5")  # a model's name is no dialect's


def test_no_module_outside_the_hook_distributions_names_a_dialect() -> None:
    found = [
        hit
        for dist in sorted((REPO / "packages").iterdir())
        if dist.is_dir() and dist.name not in HOOK_DISTRIBUTIONS
        for source in sorted((dist / "src").rglob("*.py"))
        for hit in _named(source)
    ]
    assert found == [], "ask the loaded hook dialects (dsh.hooks.dialect) instead:\n" + "\n".join(found)
