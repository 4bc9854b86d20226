"""The ``hooks`` plugin: its config, and loading the hook runner into the ``hooks`` service.

Importing this module is cheap: the runner (asyncio, the executor) and the hook-file loader are
imported only when the plugin is applied, i.e. when a deployment configures hooks.
"""

from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from dsh.core import Context, Plugin
from dsh.session import DSH_HOME

from ._key import HOOKS

if TYPE_CHECKING:
    from ._table import Dialect, HookTable


class HooksConfig(NamedTuple):
    """Config of the ``hooks`` plugin: each dialect inline or as a path to the peer's file."""

    claude: dict[str, Any] | str | None = None
    codex: dict[str, Any] | str | None = None
    claude_plugins: tuple[str, ...] = ()
    """Claude Code plugin folders to load by path (``~/.claude/plugins/x``): their ``hooks/hooks.json``
    (and manifest hooks) join the Claude Code hooks, with ``CLAUDE_PLUGIN_ROOT`` and ``CLAUDE_PLUGIN_DATA``;
    their ``skills/`` become a source of the ``skills`` service."""
    claude_transcript: Literal["plugins", "all", "off"] = "plugins"
    """Which Claude Code hooks get, as ``transcript_path``, a view of the session in Claude Code's own
    ``.jsonl`` format (under ``<DSH_HOME>/transcripts/claude-code/``, current when the hook runs):
    those of ``claude_plugins`` folders (the default), every Claude Code hook, or none. The others get
    the persistence's ``locate()``."""
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

    from ._dialect import dialects
    from ._load import load_hook_table
    from ._process import hook_executor
    from ._service import HookRunner
    from ._table import merge_tables

    base = Path(config.base_dir).expanduser() if config.base_dir else None
    home = ctx.get(DSH_HOME)
    tables: dict[Dialect, HookTable] = {}
    for dialect in dialects():
        # Each dialect's hooks file is the config field of its name; it may load more (plugin folders).
        own = load_hook_table(dialect.name, getattr(config, dialect.name), base)
        extra = dialect.extra_tables(ctx, config, base, home)
        tables[dialect.name] = merge_tables(dialect.name, [own, *extra], own.source) if extra else own
    if any(table.warnings for table in tables.values()):
        from dsh.paths.log import logger  # only to report them: a clean hooks config loads no logging

        for table in tables.values():
            for warning in table.warnings:
                logger("dsh.hooks").warning("%s", warning)
    runner = HookRunner(
        ctx,
        tables,
        model=config.model,
        permission_mode=config.permission_mode,
        ask=config.ask,
        transcript_view=config.claude_transcript,
        # Long hook output spills under the home, never into a shared temporary directory.
        executor=hook_executor(
            credential_pattern=config.credential_pattern,
            spill_dir=home / "output" if home is not None else None,
        ),
    )
    ctx.effect(lambda: runner.close, label="hook runner")
    ctx.provide(HOOKS, runner)


plugin = Plugin(name="hooks", apply=_apply, Config=HooksConfig)
"""The ``hooks`` entry of the ``dsh.plugins`` group."""
