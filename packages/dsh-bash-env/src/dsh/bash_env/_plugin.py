"""The ``bash-env`` plugin: the registry service, its built-in facts, and entry-point contributors."""

import os
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

from dsh.bash import DSH_ENV_PREFIX, SHELL_EXECUTOR, Executor, World, world_of
from dsh.core import Context, FieldError, Plugin
from dsh.loader import EntryPointItem, follow_group
from dsh.paths import DEPLOYMENT_ENV
from dsh.session import EMPTY_MAPPING, ToolExecution, plugin_home
from dsh.session.persistence import SESSION_PERSISTENCE, SessionPersistence

from ._declare import BUILTIN_DISTRIBUTION, as_contributor
from ._registry import BASH_ENV, DEFAULT_RESOLVE_TIMEOUT, BashEnvRegistry, Reach, check_resolve_timeout

SESSION_JSONL_KEY = DSH_ENV_PREFIX + "SESSION_JSONL"

BASH_ENV_GROUP = "dsh.bash_env"
"""Entry-point group of contributors: each names a contributor, or a callable returning one."""


def current_world(ctx: Context) -> World:
    """The world of the executor the shell tools use now (looked up at each call, never cached)."""
    executor: Executor | None = ctx.get(SHELL_EXECUTOR)
    return world_of(executor)


class PersistenceTranslator:
    """Built-in contributor of ``DSH_SESSION_JSONL``, from the *current* persistence service.

    The service is looked up at every collection, never cached, so a backend replaced at
    run time is followed by the next call; so is the executor, whose world decides whether the
    path is true for the child (readable at that path there).
    """

    name = "session-persistence"
    variables: Mapping[str, str] = {
        SESSION_JSONL_KEY: "Absolute path of this session's JSONL transcript; it may not exist before "
        "the first turn ends and holds only flushed turns."
    }

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        """The JSONL path when the active backend locates one and the executor's child can read it there."""
        path, _ = self._located(execution, current_world(self._ctx))
        return {} if path is None else {SESSION_JSONL_KEY: path}

    def explain(self, execution: ToolExecution | None, world: World) -> Mapping[str, Reach]:
        """Whether a child of ``world`` gets ``DSH_SESSION_JSONL`` for ``execution`` (None: per call), and why."""
        if execution is None:
            return {
                SESSION_JSONL_KEY: Reach(
                    None, f"per call: where the session's transcript is readable at its path in {world.label}"
                )
            }
        path, why = self._located(execution, world)
        return {SESSION_JSONL_KEY: Reach(path is not None, why)}

    def _located(self, execution: ToolExecution, world: World) -> tuple[str | None, str]:
        """The path a child of ``world`` gets, or None; and why."""
        agent = execution.agent
        if agent is None:
            return None, "the call has no session"
        backend: SessionPersistence | None = self._ctx.get(SESSION_PERSISTENCE)
        location = None if backend is None else backend.locate(agent.header)
        if location is None or location.kind != "jsonl":
            return None, "the persistence backend keeps no JSONL file for the session"
        why = world.why_not(location.path, agent.header.cwd)
        if why is not None:
            return None, why
        return location.path, f"readable at that path in {world.label}"


class DeploymentFile:
    """Built-in contributor of ``DSH_DEPLOYMENT``: the deployment file of this harness, so a ``dsh``
    command the model runs in a managed shell uses it too.

    Managed shells never inherit the harness's own ``DSH_*`` variables; without this a nested ``dsh``
    would fall back to ``<DSH_HOME>/deployment.yaml`` or the built-in deployment and might not find
    the session it is part of. The ``dsh`` command names the file in this plugin's config
    (``deployment``) whenever its deployment is one. Registered with the other built-ins, before any
    entry-point contributor, so no installed package can hold its name or key first.
    """

    name = "deployment"
    variables: Mapping[str, str] = {
        DEPLOYMENT_ENV: "Deployment file of this harness; a dsh command run in this shell uses it too."
    }

    def __init__(self, registry: BashEnvRegistry, path: str) -> None:
        self._registry = registry
        self._path = path

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        """The file's path, where the executor's child reads it at that path (not on a remote host, not
        in a sandbox that hides it)."""
        return {DEPLOYMENT_ENV: self._path} if self._registry.world().why_not(self._path) is None else {}

    def explain(self, execution: ToolExecution | None, world: World) -> Mapping[str, Reach]:
        """Whether a child of ``world`` gets ``DSH_DEPLOYMENT``, and why."""
        why = world.why_not(self._path)
        return {DEPLOYMENT_ENV: Reach(why is None, why or f"readable at that path in {world.label}")}


Policy = Literal["required", "optional"]


class _BashEnvConfig(NamedTuple):
    dsh_home: str | None = None
    """Harness home; must agree with the deployment's (the default), which every consumer shares."""
    entry_points: bool = True
    """Load every contributor of the ``dsh.bash_env`` entry-point group."""
    exclude: tuple[str, ...] = ()
    """Entry-point names not to load."""
    resolve_timeout: float = DEFAULT_RESOLVE_TIMEOUT
    """Seconds each contributor's ``resolve()`` may take; past it that call fails naming the contributor."""
    policy: Mapping[str, Policy] = EMPTY_MAPPING
    """Per contributor name: ``required`` (the default: its failure fails the call) or ``optional``
    (its failure is one warning and its keys are absent from that call)."""
    deployment: str | None = None
    """The deployment file in effect (absolute), for ``DSH_DEPLOYMENT``; the ``dsh`` command sets it
    whenever its deployment is a file (see :class:`DeploymentFile`). None: no such fact."""


class BashEnvConfig(_BashEnvConfig):
    """Config of the ``bash-env`` plugin; a checked record (``_replace`` and ``_make`` skip the checks)."""

    __slots__ = ()

    def __new__(
        cls,
        dsh_home: str | None = None,
        entry_points: bool = True,
        exclude: Sequence[str] = (),
        resolve_timeout: float = DEFAULT_RESOLVE_TIMEOUT,
        policy: Mapping[str, Policy] = EMPTY_MAPPING,
        deployment: str | None = None,
    ) -> "BashEnvConfig":
        check_resolve_timeout(resolve_timeout)
        for name, value in policy.items():
            if value not in ("required", "optional"):
                raise FieldError("policy", f"of contributor '{name}' must be 'required' or 'optional', not {value!r}")
        if deployment is not None and not os.path.isabs(deployment):
            raise FieldError("deployment", f"must be an absolute path, not {deployment!r}")
        return super().__new__(cls, dsh_home, entry_points, tuple(exclude), resolve_timeout, policy, deployment)


def _contributor_plugin(item: EntryPointItem) -> Plugin:
    def apply(ctx: Context, config: None) -> None:
        registry = ctx.get(BASH_ENV)
        assert registry is not None  # guaranteed by inject
        registry.register(as_contributor(item.load()), origin=item)

    return Plugin(name=f"bash-env:{item.name}", apply=apply, inject=(BASH_ENV,))


def _apply(ctx: Context, config: BashEnvConfig) -> None:
    home = plugin_home(ctx, config.dsh_home)
    # Loaded through its entry point, this plugin's origin names dsh-bash-env's version: listing
    # the built-in keys then needs no importlib.metadata.
    origin = ctx.fiber.origin
    version = (
        origin.version if isinstance(origin, EntryPointItem) and origin.distribution == BUILTIN_DISTRIBUTION else None
    )
    registry = BashEnvRegistry(
        home,
        resolve_timeout=config.resolve_timeout,
        version=version,
        world=lambda: current_world(ctx),
        optional=[name for name, policy in config.policy.items() if policy == "optional"],
    )
    ctx.provide(BASH_ENV, registry)
    registry.register(PersistenceTranslator(ctx), builtin=True)
    if config.deployment is not None:
        registry.register(DeploymentFile(registry, config.deployment), builtin=True)
    if not config.entry_points:
        return
    follow_group(ctx, BASH_ENV_GROUP, _contributor_plugin, label="bash-env", exclude=config.exclude)


plugin = Plugin(name="bash-env", apply=_apply, Config=BashEnvConfig)
"""The ``bash-env`` entry of the ``dsh.plugins`` group."""
