"""The ``hooks`` plugin: its config, its dialects (each in a child fiber), and the ``hooks`` service."""

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from dsh.core import Context, Plugin
from dsh.loader import CATALOG, Catalog, EntryPointItem, follow_group
from dsh.paths.log import logger
from dsh.session import DSH_HOME, EMPTY_MAPPING

from ._dialect import DIALECT_GROUP, HookDialect, load_dialect, register_dialect
from ._hooks import Hooks
from ._key import HOOKS
from ._load import load_hook_table
from ._table import HookTable, HookTables, merge_tables

if TYPE_CHECKING:
    from ._service import HookRunner


class HooksConfig(NamedTuple):
    """Config of the ``hooks`` plugin: each dialect's hooks inline or as a path to the peer's file.

    ``dialects`` gives any loaded dialect's (a third party's included) by its name; the two dialects
    dsh-hooks ships keep their top-level keys (``claude``, ``codex``), which deployment files use.
    """

    claude: dict[str, Any] | str | None = None
    codex: dict[str, Any] | str | None = None
    dialects: Mapping[str, dict[str, Any] | str] = EMPTY_MAPPING
    """Per dialect name, its hooks inline or a path to its file (``{gemini: ~/.gemini/settings.json}``)."""
    home_files: bool = False
    """Read each dialect this config gives no source from its file under ``<DSH_HOME>/hooks/``
    (``<name>.json``: ``claude.json``, ``codex.json``, ``gemini.json``), if it is there. The ``dsh``
    command's default deployment sets it."""
    claude_plugins: tuple[str, ...] = ()
    """Claude Code plugin folders to load by path (``~/.claude/plugins/x``): their ``hooks/hooks.json``
    (and manifest hooks) join the Claude Code hooks, with ``CLAUDE_PLUGIN_ROOT`` and ``CLAUDE_PLUGIN_DATA``;
    their ``skills/`` become a source of the ``skills`` service."""
    claude_transcript: Literal["plugins", "all", "off"] = "all"
    """Which Claude Code hooks get, as ``transcript_path``, a view of the session in Claude Code's own
    ``.jsonl`` format (under ``<DSH_HOME>/transcripts/claude-code/``, current when the hook runs):
    every Claude Code hook (the default), only those of ``claude_plugins`` folders, or none. The others
    get the persistence's ``locate()``."""
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
    base = Path(config.base_dir).expanduser() if config.base_dir else None
    home = ctx.get(DSH_HOME)

    def build(tables: HookTables) -> "HookRunner":
        # What runs a hook (processes, payloads, decisions, env files): imported and built only once
        # a table holds a hook, which a command with no hooks file never finds (see ._hooks).
        from ._process import hook_executor
        from ._service import HookRunner

        return HookRunner(
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

    hooks = Hooks(build)
    ctx.effect(lambda: hooks.close, label="hook runner")
    catalog = ctx.get(CATALOG) or Catalog()
    # Every installed dialect's hooks are read now, so a hooks file that cannot be read or trusted
    # fails this plugin (and the boot) as it always has; each dialect then lives in a child fiber
    # (below), so uninstalling its distribution and refreshing removes it and its hooks stop.
    ready: dict[str, tuple[HookDialect, HookTable]] = {}
    for item in catalog.items(DIALECT_GROUP):
        try:
            dialect = as_dialect(item.load(), item.who())
        except Exception:
            continue
        ready[item.name] = (dialect, _read_table(ctx, dialect, config, base, home, hold=False))
    ctx.provide(HOOKS, hooks)

    def dialect_plugin(item: EntryPointItem) -> Plugin:
        def apply(child: Context, _: None) -> None:
            preloaded = ready.pop(item.name, None)
            dialect = preloaded[0] if preloaded else as_dialect(item.load(), item.who())
            _hold(child, dialect)
            table = preloaded[1] if preloaded else _read_table(child, dialect, config, base, home, hold=True)
            child.effect(lambda: hooks.tables.add(dialect.name, table), label=f"{dialect.peer} hooks")

        return Plugin(name=f"hooks:{item.name}", apply=apply)

    follow_group(ctx, DIALECT_GROUP, dialect_plugin, label="hooks")
    tables = hooks.tables
    unknown = sorted(set(config.dialects) - set(tables))
    if unknown:
        tables.add_warnings(
            f"hooks config: no hook dialect named {name!r} is installed; its hooks do not run "
            f"(dialects: {', '.join(d.name for d in tables.dialects()) or 'none'})"
            for name in unknown
        )
    for warning in tables.warnings:
        logger("dsh.hooks").warning("%s", warning)


def as_dialect(value: object, who: str) -> HookDialect:
    """The dialect an entry point names (an instance, or a zero-argument callable returning one)."""
    if not isinstance(value, HookDialect) and callable(value):
        value = value()
    if not isinstance(value, HookDialect) or not value.name:
        raise TypeError(
            f"hook dialect entry point {who} names {value!r}, not a named dsh.hooks.dialect.HookDialect; "
            "point it at an instance (or a class) of a HookDialect subclass"
        )
    return value


def _hold(ctx: Context, dialect: HookDialect) -> None:
    """Make ``dialect`` known, and its peer's identity variables kept from children, for ``ctx``'s fiber."""
    ctx.effect(lambda: load_dialect(dialect), label=f"{dialect.peer} hook dialect")


def _source(dialect: HookDialect, config: HooksConfig, home: Path | None) -> tuple[Any, str | None]:
    """Where ``dialect``'s hooks come from (None: nowhere), and the home file that would be it."""
    given = config.dialects.get(dialect.name)
    if given is None and dialect.name in HooksConfig._fields:
        given = getattr(config, dialect.name)
    if given is None and config.home_files and home is not None:
        path = home / "hooks" / dialect.file_name()
        return (str(path) if path.is_file() else None), str(path)
    return given, None


def _read_table(
    ctx: Context, dialect: HookDialect, config: HooksConfig, base: Path | None, home: Path | None, *, hold: bool
) -> HookTable:
    """``dialect``'s hooks: its source (:func:`_source`) and what it loads beyond (plugin folders)."""
    release: Callable[[], None] = (lambda: None) if hold else register_dialect(dialect)
    try:
        source, home_file = _source(dialect, config, home)
        own = load_hook_table(dialect.name, source, base)
        if source is None and home_file is not None:  # watched: its appearance changes the hooks
            own = own._replace(files=(home_file,))
        extra = dialect.extra_tables(ctx, config, base, home)
    finally:
        release()
    return merge_tables(dialect.name, [own, *extra], own.source) if extra else own


plugin = Plugin(name="hooks", apply=_apply, Config=HooksConfig)
"""The ``hooks`` entry of the ``dsh.plugins`` group."""
