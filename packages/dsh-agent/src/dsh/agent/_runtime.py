"""The agent runtime: the built-in default deployment and booting with the agent's built-ins."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from dsh.core import Deployment, PersistenceChoice, PluginEntry, Runtime, boot, compose, load_deployment
from dsh.paths import resolve_dsh_home
from dsh.session import sessions_plugin, tools_plugin

from ._loop import spawn_plugin

BUILTINS = (tools_plugin, sessions_plugin, spawn_plugin)
"""Loaded at the root of every agent runtime: the tool registry, the session store and ``spawn_agent``."""

DEFAULT_SOURCE = "<default deployment>"


def default_deployment(env: Mapping[str, str] | None = None) -> Deployment:
    """JSONL under ``$DSH_HOME/sessions``, the local executor, bash-env and the bash tool.

    Hooks are added when ``$DSH_HOME/hooks/claude.json`` (a Claude Code ``settings.json``-style
    file) or ``$DSH_HOME/hooks/codex.json`` (a Codex ``hooks.json``) exists.
    """
    home = resolve_dsh_home(None, env)
    plugins = [
        PluginEntry(id="bash-local", name="bash-local"),
        PluginEntry(id="bash-env", name="bash-env"),
        PluginEntry(id="tool-bash", name="tool-bash"),
    ]
    hooks = {
        d: str(home / "hooks" / f"{d}.json") for d in ("claude", "codex") if (home / "hooks" / f"{d}.json").is_file()
    }
    if hooks:
        plugins.append(PluginEntry(id="hooks", name="hooks", config=hooks))
    return Deployment(persistence=PersistenceChoice(backend="jsonl"), plugins=plugins)


def _deployment(path: str | os.PathLike[str] | None, env: Mapping[str, str] | None) -> tuple[Deployment, str]:
    if path is None:
        return default_deployment(env), DEFAULT_SOURCE
    deployment = load_deployment(path)
    # Relative hook files in a deployment resolve against the deployment's folder.
    for entry in deployment.plugins:
        if entry.name == "hooks":
            entry.config.setdefault("base_dir", str(Path(path).parent.absolute()))
    return deployment, os.fspath(path)


def open_runtime(
    path: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None, check: bool = True
) -> Runtime:
    """Boot a deployment file (or the default) with the agent built-ins.

    With ``check=False`` the runtime is returned even when entries failed, for diagnostics.
    """
    deployment, source = _deployment(path, env)
    if check:
        runtime = boot(deployment, source=source, builtins=BUILTINS, env=env)
    else:
        runtime = compose(deployment, source=source, builtins=BUILTINS, env=env)
    # A broken third-party contributor must not stop the harness, but it must not go unseen either.
    for warning in runtime.warnings():
        print(f"dsh: warning: {warning}", file=sys.stderr)
    return runtime
