"""Claude Code plugin folders loaded by path: hooks (with ``CLAUDE_PLUGIN_ROOT``, ``CLAUDE_PLUGIN_DATA``) and skills.

A plugin folder holds ``.claude-plugin/plugin.json`` (its manifest: ``name``, and optionally
``hooks``: a path or list of paths of further hook files, relative to the folder, or an inline
hooks object) and ``hooks/hooks.json`` (a hooks file in the Claude Code format, with an optional
``description``). Each hook of the plugin runs with ``CLAUDE_PLUGIN_ROOT`` (the folder) and
``CLAUDE_PLUGIN_DATA`` (``<DSH_HOME>/plugins/data/<name>``: private, created 0700, kept across runs).
The folder is trusted as a hook file is: owned by you (or root), writable by nobody else.

A plugin's ``skills/`` folder (``<skill>/SKILL.md`` entries) becomes a source of the ``skills``
service, ``claude-plugin:<name>``, registered by a child fiber that starts once that service exists:
this package cannot import dsh-skills (a layer above it), so it names the service and the one
method it calls (:class:`SkillSources`), as service keys compare by name.
"""

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from dsh.core import Context, Disposer, Plugin, ServiceKey
from dsh.paths import UntrustedPathError, check_trusted, ensure_private_dir

from . import _claude
from ._errors import HookConfigError
from ._load import load_hook_table, read_hook_file
from ._table import HookTable, merge_tables

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class SkillSources(Protocol):
    """What this package asks of the ``skills`` service (dsh-skills' ``SkillRegistry``)."""

    def register(self, name: str, root: str | os.PathLike[str]) -> Disposer:
        """Add a folder of skills under a unique source name; an effect of the caller's fiber."""
        ...


SKILL_SOURCES: ServiceKey[SkillSources] = ServiceKey("skills")
"""The ``skills`` service, by name."""

SKILL_SOURCE_PREFIX = "claude-plugin:"
"""A plugin's skills are the source ``claude-plugin:<name>``."""


class ClaudePlugin(NamedTuple):
    """A loaded Claude Code plugin folder."""

    name: str
    root: Path
    data: Path | None
    """``CLAUDE_PLUGIN_DATA``; None without a home."""
    table: HookTable
    skills: Path | None = None
    """The plugin's ``skills/`` folder, when it has one (checked as the folder is)."""


def load_claude_plugin(path: str, base: Path | None, home: Path | None) -> ClaudePlugin:
    """Read the plugin folder at ``path`` (``~`` expanded, relative to ``base``); a fault fails the hooks plugin."""
    root = Path(os.path.expanduser(path))
    if not root.is_absolute() and base is not None:
        root = base / root
    root = Path(os.path.abspath(root))
    where = f"Claude Code plugin {root}"
    if not root.is_dir():
        raise HookConfigError(f"{where}: not a folder; name a plugin's folder", source=where, path=str(root))
    try:
        check_trusted(root, "Claude Code plugin folder")
    except UntrustedPathError as exc:
        raise HookConfigError(str(exc), source=where, path=str(root)) from None
    manifest = _manifest(root, where)
    name = manifest.get("name", root.name)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise HookConfigError(
            f"{where}: .claude-plugin/plugin.json 'name' must be letters, digits, '.', '_' or '-', not {name!r}",
            source=where,
            path=str(root / ".claude-plugin" / "plugin.json"),
        )
    data = ensure_private_dir(home / "plugins" / "data" / name, "plugin data folder") if home is not None else None
    tables = [_hook_file(root / "hooks" / "hooks.json", name)] if (root / "hooks" / "hooks.json").exists() else []
    tables.extend(_manifest_hooks(manifest.get("hooks"), root, name, where))
    table = merge_tables(_claude.DIALECT.name, tables, where)
    # What a long-lived host watches besides the files read: the folders trusted here (and the data
    # folder its hooks write to), so a change of their owner or mode is seen as a cold start sees it.
    watched = [str(root / "hooks" / "hooks.json"), str(root / ".claude-plugin" / "plugin.json"), str(root / "skills")]
    if data is not None:
        watched.append(str(data))
    table = table._replace(files=tuple(dict.fromkeys((*table.files, *watched))))
    skills = root / "skills"
    if skills.is_dir():
        try:
            check_trusted(skills, "Claude Code plugin skills folder")
        except UntrustedPathError as exc:
            raise HookConfigError(str(exc), source=where, path=str(skills)) from None
    return ClaudePlugin(name, root, data, with_plugin(table, root, data), skills if skills.is_dir() else None)


def _manifest(root: Path, where: str) -> Mapping[str, Any]:
    path = root / ".claude-plugin" / "plugin.json"
    if not path.exists():
        return {}
    raw = read_hook_file(path, f"{where}: manifest {path}", "plugin manifest")
    if not isinstance(raw, Mapping):
        raise HookConfigError(f"{where}: {path} must be a JSON object", source=where, path=str(path))
    return raw


def _hook_file(path: Path, name: str) -> HookTable:
    return load_hook_table(_claude.DIALECT.name, str(path), None, label=f"claude plugin {name} hooks file {path}")


def _manifest_hooks(value: Any, root: Path, name: str, where: str) -> list[HookTable]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [load_hook_table(_claude.DIALECT.name, dict(value), None, label=f"claude plugin {name} manifest hooks")]
    paths = [value] if isinstance(value, str) else value
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise HookConfigError(
            f"{where}: manifest 'hooks' must be a path, a list of paths or a hooks object", source=where
        )
    found = []
    for relative in paths:
        path = Path(os.path.abspath(root / relative))
        if path == root / "hooks" / "hooks.json":
            continue  # the default file is read once
        found.append(_hook_file(path, name))
    return found


def with_plugin(table: HookTable, root: Path, data: Path | None) -> HookTable:
    """``table`` with each command marked as the plugin's (its environment gets the plugin's folders)."""
    events = {
        event: tuple(
            group._replace(
                hooks=tuple(
                    h._replace(plugin_root=str(root), plugin_data=None if data is None else str(data))
                    for h in group.hooks
                ),
            )
            for group in groups
        )
        for event, groups in table.events.items()
    }
    return table._replace(events=events)


def plugin_names(plugins: Iterable[ClaudePlugin]) -> list[str]:
    """The loaded plugins' names; two of one name fail (their data folders would be one)."""
    seen: dict[str, Path] = {}
    for plugin in plugins:
        if plugin.name in seen:
            raise HookConfigError(
                f"Claude Code plugins {seen[plugin.name]} and {plugin.root} are both named '{plugin.name}'; "
                "load one of them",
                source=f"Claude Code plugin {plugin.root}",
                path=str(plugin.root),
            )
        seen[plugin.name] = plugin.root
    return list(seen)


def load_plugin_skills(ctx: Context, plugin: ClaudePlugin) -> None:
    """Make ``plugin``'s ``skills/`` a source of the ``skills`` service, once that service exists.

    The source lives in a child fiber of the hooks plugin (non-essential: a deployment without the
    skills plugin has no skills to offer, so it waits quietly); it goes when the hooks plugin does.
    """
    if plugin.skills is None:
        return
    folder = plugin.skills

    def apply(child: Context, config: None) -> None:
        child.require(SKILL_SOURCES).register(SKILL_SOURCE_PREFIX + plugin.name, folder)

    source = SKILL_SOURCE_PREFIX + plugin.name
    ctx.plugin(Plugin(name=source, apply=apply, inject=(SKILL_SOURCES,)), label=f"hooks:{source}", essential=False)
