"""The ``hooks`` plugin: its config, and loading the hook runner into the ``hooks`` service.

Importing this module is cheap: the runner (asyncio, the executor) and the hook-file loader are
imported only when the plugin is applied, i.e. when a deployment configures hooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from dsh.core import DSH_HOME, Context, Plugin

from ._key import HOOKS

if TYPE_CHECKING:
    from ._table import Dialect, HookTable


@dataclass(frozen=True, kw_only=True)
class HooksConfig:
    """Config of the ``hooks`` plugin: each dialect inline or as a path to the peer's file."""

    claude: dict[str, Any] | str | None = None
    codex: dict[str, Any] | str | None = None
    model: str = "dsh-scripted"
    """The model name Codex payloads carry."""
    permission_mode: Literal["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"] = "default"
    ask: Literal["deny", "allow"] = "deny"
    """What a PreToolUse ``ask`` decision means: nobody can approve in dsh, so by default a denial."""
    base_dir: str | None = None
    """Directory relative hook-file paths resolve against; default the working directory."""
    credential_pattern: str | None = None
    """Ambient names to scrub from hooks. Default none: hooks are the user's own scripts and, as in
    the peers, see the user's environment (credentials included). ``DSH_*`` is always removed."""


def _apply(ctx: Context, config: HooksConfig) -> None:
    # Imported here, not at the top: a deployment without hooks never pays for the runner.
    from pathlib import Path

    from ._load import load_hook_table
    from ._process import hook_executor
    from ._service import HookRunner

    base = Path(config.base_dir).expanduser() if config.base_dir else None
    tables: dict[Dialect, HookTable] = {
        "claude": load_hook_table("claude", config.claude, base),
        "codex": load_hook_table("codex", config.codex, base),
    }
    if any(table.warnings for table in tables.values()):
        from dsh.core.log import logger  # only to report them: a clean hooks config loads no logging

        for table in tables.values():
            for warning in table.warnings:
                logger("dsh.hooks").warning("%s", warning)
    runner = HookRunner(
        ctx,
        tables,
        model=config.model,
        permission_mode=config.permission_mode,
        ask=config.ask,
        # Long hook output spills under the home, never into a shared temporary directory.
        executor=hook_executor(
            credential_pattern=config.credential_pattern,
            spill_dir=home / "output" if (home := ctx.get(DSH_HOME)) is not None else None,
        ),
    )
    ctx.effect(lambda: runner.close, label="hook runner")
    ctx.provide(HOOKS, runner)


plugin = Plugin(name="hooks", apply=_apply, Config=HooksConfig)
"""The ``hooks`` entry of the ``dsh.plugins`` group."""
