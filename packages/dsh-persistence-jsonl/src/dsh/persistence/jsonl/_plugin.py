"""The ``jsonl`` entry of the ``dsh.persistence`` group and its config."""

import os
from pathlib import Path
from typing import NamedTuple

from dsh.core import Context, Plugin
from dsh.session import plugin_home
from dsh.session.persistence import SESSION_PERSISTENCE

from ._backend import JsonlPersistence


class JsonlConfig(NamedTuple):
    """Config of the ``jsonl`` backend."""

    root: str | None = None
    """Directory of transcripts; default ``<DSH_HOME>/sessions``."""
    dsh_home: str | None = None
    """Harness home; must agree with the deployment's (composition checks)."""
    fsync: bool = True
    """fsync every flush; turning it off trades crash durability of recent turns for speed."""


def _apply(ctx: Context, config: JsonlConfig) -> None:
    home = plugin_home(ctx, config.dsh_home)
    root = Path(os.path.expanduser(config.root)) if config.root else home / "sessions"
    backend = JsonlPersistence(root.absolute(), fsync=config.fsync, home=None if config.root else str(home))
    ctx.provide(SESSION_PERSISTENCE, backend)
    ctx.effect(lambda: backend.close, label="close jsonl locks")


plugin = Plugin(name="jsonl", apply=_apply, Config=JsonlConfig)
"""The ``jsonl`` entry of the ``dsh.persistence`` group."""
