"""Helpers of the root suite: a booted agent runtime over every installed plugin.

The helpers that need no dsh distribution live in ``dsh.testing`` (re-exported here).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dsh.testing import dsh, make_dist, remove_dist, touch_dir

if TYPE_CHECKING:
    from dsh.loader import Runtime

__all__ = ["BAD_CONTRIBUTOR_PLUGINS", "dsh", "harness", "make_dist", "record_hook", "remove_dist", "touch_dir"]


BAD_CONTRIBUTOR_PLUGINS: list[dict[str, object]] = [
    {"id": "bash-env", "name": "bash-env"},
    {"id": "tool-bash", "name": "tool-bash"},
    {"id": "bad", "name": "tests.integration.bad_contributor:plugin"},
]
"""A deployment whose contributor returns a key it never declared."""


def harness(tmp_path: Path, backend: str = "jsonl", plugins: list[dict[str, object]] | None = None) -> Runtime:
    """A booted agent runtime over a fresh home under ``tmp_path``."""
    from dsh.agent import BUILTINS
    from dsh.loader import boot, parse_deployment

    deployment = parse_deployment(
        {
            "dsh_home": str(tmp_path / "home"),
            "persistence": {"backend": backend},
            "plugins": plugins
            if plugins is not None
            else [
                {"id": "bash-local", "name": "bash-local"},
                {"id": "bash-env", "name": "bash-env"},
                {"id": "tool-bash", "name": "tool-bash"},
                {"id": "tool-pwsh", "name": "tool-pwsh"},
            ],
        }
    )
    return boot(deployment, source="test deployment", builtins=BUILTINS)


def record_hook(home: Path, event: str, record: Path) -> None:
    """A Claude-format hooks file under ``home`` whose ``event`` hook appends each input it gets to ``record``."""
    import json
    import shlex

    hooks = home / "hooks"
    hooks.mkdir(parents=True, mode=0o700, exist_ok=True)
    command = f"cat >> {shlex.quote(str(record))}; echo >> {shlex.quote(str(record))}"
    (hooks / "claude.json").write_text(
        json.dumps({"hooks": {event: [{"hooks": [{"type": "command", "command": command}]}]}})
    )
