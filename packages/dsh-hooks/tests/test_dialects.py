"""Each hook dialect is one module owning its differences; the stage modules name no dialect (issue 22 item 4)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import dsh.hooks
from dsh.hooks import _claude, _codex
from dsh.hooks._dialect import DIALECT_GROUP, HookDialect, dialect_names, dialect_of, dialects, register_dialect
from dsh.hooks.dialect import loaded


@pytest.fixture(autouse=True)
def builtin_dialects() -> Iterator[None]:
    """Claude Code and Codex loaded, as the hooks plugin loads them from their entry points."""
    with loaded(_claude.DIALECT, _codex.DIALECT):
        yield


PACKAGE = Path(dsh.hooks.__file__).parent

DIALECT_MODULES = {"_claude.py", "_codex.py"}
"""One module per peer."""
OWNED = {"_dialect.py", "_rules.py", "_plugins.py", "_transcript.py", "_runner.py", "__init__.py", "dialect.py"}
"""Not stages: the dialect contract and registry; Claude Code's own features, used only through its
dialect module (``if`` rules, plugin folders, its transcript format); the config, whose keys are
the dialects' names as deployment files spell them; the package's front page and the contract's."""

STAGES = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in DIALECT_MODULES | OWNED)


def test_the_stages_are_the_pipeline() -> None:
    assert set(STAGES) >= {"_load.py", "_table.py", "_select.py", "_payload.py", "_process.py"}
    assert set(STAGES) >= {"_decision.py", "_outcome.py", "_service.py", "_envfile.py", "_detached.py"}


@pytest.mark.parametrize("module", STAGES)
def test_a_stage_module_names_no_dialect(module: str) -> None:
    text = (PACKAGE / module).read_text()
    named = [
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if re.search(r"claude|codex", line, re.IGNORECASE)
    ]
    assert named == [], f"{module} names a dialect; ask its HookDialect instead"


def test_only_dialect_modules_import_claude_code_features() -> None:
    features = {"_rules", "_plugins", "_transcript", "_claude", "_codex"}
    for module in STAGES:
        tree = ast.parse((PACKAGE / module).read_text())
        imported = {
            node.module.lstrip(".") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
        }
        assert not imported & features, module


def test_every_dialect_states_its_own_facts() -> None:
    assert dialect_names() == ("claude", "codex")  # the order hooks run and are reported in
    for dialect in dialects():
        assert isinstance(dialect, HookDialect) and dialect_of(dialect.name) is dialect
        assert dialect.peer and dialect.events and dialect.event_keys and dialect.env_file_names
        assert set(dialect.event_keys) <= dialect.events, "dsh fires only events the peer documents"
        assert dialect.failed_tool_event in dialect.event_keys
    with pytest.raises(ValueError, match="no hook dialect named 'gemini' is loaded; dialects: claude, codex"):
        dialect_of("gemini")
    assert {
        "CLAUDE_CODE_SESSION_ID",
        "CLAUDE_ENV_FILE",
        "CLAUDE_PROJECT_DIR",
        "CLAUDE_PLUGIN_ROOT",
        "CLAUDE_PLUGIN_DATA",
    } == _claude.IDENTITY_VARIABLES
    assert {"CODEX_THREAD_ID", "CODEX_ENV_FILE"} <= _codex.IDENTITY_VARIABLES


class _Peer(HookDialect):
    name = "peer"
    peer = "A Peer"


def test_a_dialect_is_known_while_a_registration_holds_it() -> None:
    peer = _Peer()
    first, second = register_dialect(peer), register_dialect(peer)  # two runtimes of one process
    assert dialect_of("peer") is peer and dialect_names() == ("claude", "codex", "peer")
    first()
    first()  # idempotent
    assert dialect_of("peer") is peer
    second()
    with pytest.raises(ValueError, match="no hook dialect named 'peer'"):
        dialect_of("peer")


def test_two_dialects_of_one_name_are_refused_naming_both_peers() -> None:
    class Other(_Peer):
        peer = "Another Peer"

    dispose = register_dialect(_Peer())
    try:
        with pytest.raises(ValueError, match=r"two hook dialects are named 'peer' \(A Peer and Another Peer\)"):
            register_dialect(Other())
    finally:
        dispose()


def test_the_built_in_dialects_are_entries_of_the_dialect_group() -> None:
    # Found through dsh.hook_dialects like any third party's: declared in dsh-hooks' installed metadata.
    from importlib.metadata import entry_points

    ours = {e.name: e for e in entry_points(group=DIALECT_GROUP) if e.dist is not None and e.dist.name == "dsh-hooks"}
    assert {name: e.value for name, e in ours.items()} == {
        "claude": "dsh.hooks._claude:DIALECT",
        "codex": "dsh.hooks._codex:DIALECT",
    }
    assert ours["claude"].load() is _claude.DIALECT and ours["codex"].load() is _codex.DIALECT
