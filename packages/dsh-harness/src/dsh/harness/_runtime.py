"""The agent runtime: the built-in default deployment and booting with the agent's built-ins."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from dsh.agent import BUILTINS
from dsh.hooks import hook_runner
from dsh.loader import (
    Catalog,
    Deployment,
    DeploymentError,
    EntryPointMemo,
    PersistenceChoice,
    PluginEntry,
    Runtime,
    ValidationMemo,
    boot,
    compose,
    load_deployment,
    resolve_home,
)
from dsh.paths import check_trusted, ensure_private_dir, resolve_dsh_home
from dsh.paths.deployment import DeploymentChoice, choose_deployment

DEFAULT_SOURCE = "<default deployment>"
DEFAULT_IDS = ("bash-local", "bash-env", "tool-bash", "skills", "hooks")
"""The ids :func:`default_plugins` gives, in their order."""


class StartupMemos(Protocol):
    """What an application hands :func:`open_runtime` to remember discovery and validation between
    processes in the home (the ``dsh`` command's cold start-up does; without them the loader scans and
    validates every time). Either may answer None: that one is not remembered.
    """

    def entry_points(self, home: Path) -> EntryPointMemo | None:
        """The memo of installed entry points for the home ``home`` (checked private already)."""
        ...

    def validation(self, home: Path, catalog: Catalog) -> ValidationMemo | None:
        """The memo of validated forms for ``home``, under the installed distributions ``catalog`` reflects."""
        ...


def default_plugins(home: Path) -> list[PluginEntry]:
    """The default plugin set: the local executor, bash-env, the bash tool, skills, and hooks when configured.

    Hooks are always there: each installed hook dialect reads its own file under ``<home>/hooks/``
    when it exists (``claude.json``, a Claude Code ``settings.json``-style file; ``codex.json``, a
    Codex ``hooks.json``; ``gemini.json`` with dsh-hooks-gemini installed), and while a dialect is
    loaded its peer's identity variables never reach a child, hooks configured or not.
    """
    hooks_dir = home / "hooks"
    if hooks_dir.is_dir():
        check_trusted(hooks_dir, "hooks directory")  # never run hooks others could have written
    plugins = [PluginEntry(id=name, name=name) for name in DEFAULT_IDS if name != "hooks"]
    plugins.append(PluginEntry(id="hooks", name="hooks", config={"home_files": True}))
    return plugins


def default_deployment(env: Mapping[str, str] | None = None) -> Deployment:
    """JSONL under ``$DSH_HOME/sessions`` with the :func:`default_plugins`."""
    return Deployment(
        persistence=PersistenceChoice(backend="jsonl"), plugins=default_plugins(resolve_dsh_home(None, env))
    )


def layer_on_defaults(deployment: Deployment, source: str, env: Mapping[str, str] | None = None) -> Deployment:
    """A deployment file states only what it changes; this fills in the rest from the defaults.

    Omitted ``plugins`` means the default set. Listed entries replace the default with the same id
    (``{id: tool-bash, config: {...}}`` reconfigures it) or are added after the defaults;
    ``{id: hooks, enabled: false}`` removes a default (and is no error where that default is absent:
    hooks without a hooks file). Omitted ``persistence`` is the default backend.
    """
    defaults = default_plugins(resolve_home(deployment, env))
    if deployment.plugins is None:
        return deployment.replace(plugins=defaults)
    by_id = {entry.id: entry for entry in defaults}
    for entry in deployment.plugins:
        # Any default may be switched off, present here or not: a file that turns hooks off must
        # boot alike on a machine with a hooks file and on one without.
        if not entry.enabled and entry.id not in DEFAULT_IDS:
            raise DeploymentError(
                f"{source}: entry '{entry.id}' has enabled: false but is not a default plugin "
                f"(defaults: {', '.join(DEFAULT_IDS)}); delete the entry instead",
                source=source,
            )
        by_id[entry.id] = entry
    ordered = [by_id[i] for i in DEFAULT_IDS if i in by_id]
    ordered += [e for e in deployment.plugins if e.id not in DEFAULT_IDS]
    return deployment.replace(plugins=[e for e in ordered if e.enabled])


def _deployment(
    choice: DeploymentChoice, env: Mapping[str, str] | None, validated: ValidationMemo | None
) -> tuple[Deployment, str]:
    if choice.path is None:
        return default_deployment(env), DEFAULT_SOURCE
    loaded = load_deployment(choice.path, validated=validated)
    return layered(loaded, choice.path, env, path=choice.path), choice.path


def layered(
    deployment: Deployment, source: str, env: Mapping[str, str] | None = None, *, path: str | None = None
) -> Deployment:
    """A deployment as it boots: :func:`layer_on_defaults`, and what its file (``path``) implies.

    A deployment read from a file hands that file on to its shells (``DSH_DEPLOYMENT``, a built-in
    fact of ``bash-env``, named in its config: the file in effect, whatever the file says there), and
    its relative hook files resolve against the file's folder.
    """
    deployment = layer_on_defaults(deployment, source, env)
    if path is None:
        return deployment
    plugins = list(deployment.plugins or ())
    in_effect = os.path.abspath(path)
    base_dir = str(Path(path).parent.absolute())
    for index, entry in enumerate(plugins):
        if entry.name == "bash-env":
            plugins[index] = entry._replace(config={**entry.config, "deployment": in_effect})  # already checked
        elif entry.name == "hooks" and "base_dir" not in entry.config:
            plugins[index] = entry._replace(config={**entry.config, "base_dir": base_dir})  # already checked
    return deployment.replace(plugins=plugins)


def open_runtime(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    choice: DeploymentChoice | None = None,
    memos: StartupMemos | None = None,
) -> Runtime:
    """Boot the deployment in effect (see :func:`choose_deployment`) with the agent built-ins.

    ``path`` plays the part of ``--deployment``; without it the same rule as the ``dsh`` command
    applies (``$DSH_DEPLOYMENT``, then ``<DSH_HOME>/deployment.yaml``, then the built-in one).
    With ``check=False`` the runtime is returned even when entries failed, for diagnostics.
    ``memos`` (:class:`StartupMemos`) may answer discovery and validation from what an earlier
    process learnt; without them the installed distributions are scanned and files validated.
    """
    if choice is None:
        choice = choose_deployment(os.fspath(path) if path is not None else None, env)
    # The home is private and ours before anything in it (a deployment.yaml, hooks) is trusted,
    # as OpenSSH's StrictModes treats ~/.ssh; a deployment file, which names code to load, is
    # checked by `load_deployment` on the descriptor it reads.
    home = resolve_dsh_home(None, env)
    ensure_private_dir(home, "DSH_HOME")
    # One catalog serves the validation memo's key (the installed distributions) and the boot.
    catalog = Catalog(None if memos is None else memos.entry_points(home))
    validated = None if memos is None else memos.validation(home, catalog)
    deployment, source = _deployment(choice, env, validated)
    return boot_layered(deployment, source, env=env, check=check, catalog=catalog, validated=validated)


def boot_layered(
    deployment: Deployment,
    source: str,
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    catalog: Catalog | None = None,
    validated: ValidationMemo | None = None,
) -> Runtime:
    """Boot an already layered deployment with the agent built-ins; its warnings go to stderr."""
    ensure_private_dir(resolve_home(deployment, env), "DSH_HOME")
    if check:
        runtime = boot(deployment, source=source, builtins=BUILTINS, env=env, catalog=catalog, validated=validated)
    else:
        runtime = compose(deployment, source=source, builtins=BUILTINS, env=env, catalog=catalog, validated=validated)
    for warning in warnings(runtime):
        print(f"dsh: warning: {warning}", file=sys.stderr)
    return runtime


def warnings(runtime: Runtime) -> list[str]:
    """What every command shows as ``dsh: warning:`` lines: loud, never fatal.

    A broken third-party contributor must not stop the harness, but it must not go unseen either;
    hook types and fields dsh cannot honour are skipped, never fatal, and never silent.
    """
    hooks = hook_runner(runtime.ctx)
    return [*runtime.warnings(), *([] if hooks is None else hooks.tables.warnings)]
