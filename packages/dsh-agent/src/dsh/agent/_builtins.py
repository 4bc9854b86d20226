"""The plugins every agent runtime loads at its root, whatever its deployment."""

from __future__ import annotations

from dsh.session import sessions_plugin, tools_plugin

from ._observe import observers_plugin
from ._spawn import spawn_plugin

BUILTINS = (tools_plugin, sessions_plugin, spawn_plugin, observers_plugin)
"""Loaded at the root of every agent runtime: the tool registry, the session store, ``spawn_agent``
and the observer registry (with every installed ``dsh.observers`` plugin)."""
