"""The diagnostic verbs ``dsh env`` and ``dsh plugins``: what is installed, who owns it, its state."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from dsh.bash_env import BASH_ENV, TOOL_CALL_ID_KEY, TURN_ID_KEY, CollectionError
from dsh.core import Fiber
from dsh.loader import Runtime
from dsh.session import SESSIONS, AgentRef, ToolExecution

from ._open import open_runtime
from ._output import print_json, say

if TYPE_CHECKING:
    import argparse


def env_verb(args: argparse.Namespace) -> int:
    """``dsh env``: every managed variable, its owner and distribution (and values for ``--session``)."""
    with open_runtime(choice=args.choice) as runtime:
        registry = runtime.ctx.require(BASH_ENV)
        values: dict[str, str] = {}
        store = runtime.ctx.require(SESSIONS)
        # Every contributor resolves once, for the session's next call (--session) or a new session's
        # first call here (never stored): "here: passed" is then what a call gets now, and a failing
        # contributor shows its failure (`reach`), never a claim of its own.
        if args.session is not None:
            header = store.resume(args.session, history=False).header
        else:
            header = store.create(os.getcwd()).header
        probe = ToolExecution("bash", "dsh-env", agent=AgentRef("main", header))
        try:
            values = dict(registry.collect(probe))
        except CollectionError:
            values = {}  # the failing contributor's keys say why
        # No call or turn is running: their ids have no value to show.
        for key in (TOOL_CALL_ID_KEY, TURN_ID_KEY):
            values.pop(key, None)
        execution = probe if args.session is not None else None
        world = registry.world()
        reach = registry.reach(execution)
        rows = []
        for info in registry.list():
            row: dict[str, Any] = {
                "key": info.key,
                "owner": info.owner,
                "distribution": info.distribution,
                "version": info.version,
                "builtin": info.builtin,
                "description": info.description,
                "lost": list(info.lost),
                "passes": reach[info.key].passes if info.key in reach else None,
                "why": reach[info.key].why if info.key in reach else "",
            }
            if args.session:
                row["value"] = values.get(info.key)
            rows.append(row)
        if args.json:
            print_json(
                {"session_id": args.session, "world": {"kind": world.kind, "label": world.label}, "variables": rows}
            )
        else:
            say(f"the shell executor's children run in {world.label} ({world.kind})")
            for row in rows:
                dist = " ".join(str(p) for p in (row["distribution"], row["version"]) if p) or "in-process"
                owner = f"{row['owner']} ({dist})"
                value = f" = {row['value']}" if args.session and row["value"] is not None else ""
                tag = " [built-in]" if row["builtin"] else ""
                passes = {True: "passed", False: "not passed", None: "decided per call"}[row["passes"]]
                say(
                    f"{row['key']}{value}\n    {row['description']}\n    owner: {owner}{tag}\n"
                    f"    here: {passes} ({row['why']})"
                )
                if row["lost"]:
                    say(f"    refused (the owner has it first): {', '.join(row['lost'])}")
        return 0


def plugin_rows(runtime: Runtime) -> list[dict[str, Any]]:
    """One row per catalogued entry point, conflict, in-process deployment entry and failed entry."""
    by_origin: dict[tuple[str, str, str], Fiber] = {}
    for live in runtime.fibers():
        if live.origin is not None:
            by_origin[(live.origin.group, live.origin.name, live.origin.distribution)] = live
    rows = []
    for group in runtime.catalog.groups():
        for item in runtime.catalog.items(group):
            fiber = by_origin.get((group, item.name, item.distribution))
            errors = [] if fiber is None else [e for e in (fiber.error, *fiber.dispose_errors) if e]
            rows.append(
                {
                    "group": group,
                    "name": item.name,
                    "distribution": item.distribution,
                    "version": item.version,
                    "state": "not loaded" if fiber is None else fiber.state.value,
                    "entry": None if fiber is None else fiber.label,
                    "error": "; ".join(errors) or None,
                }
            )
        for loss in runtime.catalog.lost(group):
            rows.append(
                {
                    "group": group,
                    "name": loss.item.name,
                    "distribution": loss.item.distribution,
                    "version": loss.item.version,
                    "state": "failed",
                    "entry": None,
                    "error": loss.message,
                }
            )
    for entry_id, fiber in runtime.entries.items():
        if fiber.origin is None:
            rows.append(
                {
                    "group": "deployment",
                    "name": fiber.name,
                    "distribution": None,
                    "version": None,
                    "state": fiber.state.value,
                    "entry": entry_id,
                    "error": fiber.error,
                }
            )
    for entry_id, message in runtime.failures.items():
        rows.append(
            {
                "group": "deployment",
                "name": entry_id,
                "distribution": None,
                "version": None,
                "state": "failed",
                "entry": entry_id,
                "error": message,
            }
        )
    return rows


def plugins_verb(args: argparse.Namespace) -> int:
    """``dsh plugins``: every discovered plugin, its distribution, version and state."""
    with open_runtime(choice=args.choice, check=False) as runtime:
        rows = plugin_rows(runtime)
        choice = args.choice
        if args.json:
            deployment = {"path": choice.path, "reason": choice.reason}
            print_json({"deployment": deployment, "plugins": rows, "problems": runtime.problems()})
        else:
            say(f"deployment: {choice.path or 'built-in default'} ({choice.reason})")
            dists = [f"{row['distribution']} {row['version']}" if row["distribution"] else "-" for row in rows]
            # Columns as wide as their longest cell, so a long group (dsh.hook_dialects) keeps them aligned.
            group_w = max((len(row["group"]) for row in rows), default=0)
            name_w = max((len(row["name"]) for row in rows), default=0)
            dist_w = max((len(dist) for dist in dists), default=0)
            for row, dist in zip(rows, dists, strict=True):
                say(f"{row['group']:<{group_w}}  {row['name']:<{name_w}}  {dist:<{dist_w}}  {row['state']}")
                if row["error"]:
                    say(f"    error: {row['error']}")
        return 0
