"""``DSH_DEPLOYMENT`` in every managed shell: a nested ``dsh`` command uses its harness's deployment.

Managed shells never inherit the harness's own ``DSH_*`` variables, so without this a ``dsh``
command run by the model would fall back to ``<DSH_HOME>/deployment.yaml`` or the built-in
deployment and might not find the session it is part of. The agent adds this entry whenever the
deployment in effect is a file (and ``bash-env`` is loaded).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from dsh.bash import World
from dsh.bash_env import BASH_ENV, BashEnvRegistry, Reach
from dsh.core import Context, Plugin
from dsh.loader import EntryPointItem
from dsh.paths import DEPLOYMENT_ENV
from dsh.session import ToolExecution


class DeploymentEnvConfig(NamedTuple):
    """The deployment file in effect (absolute)."""

    path: str


class _Deployment:
    """Contributes the deployment file's path where the executor's child reads it at that path."""

    name = "deployment"
    variables: Mapping[str, str] = {
        DEPLOYMENT_ENV: "Deployment file of this harness; a dsh command run in this shell uses it too."
    }

    def __init__(self, registry: BashEnvRegistry, path: str) -> None:
        self._registry = registry
        self._path = path

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        # A path on this machine: true only where the child reads it there (not on a remote host,
        # not in a sandbox that hides it).
        return {DEPLOYMENT_ENV: self._path} if self._registry.world().why_not(self._path) is None else {}

    def explain(self, execution: ToolExecution | None, world: World) -> Mapping[str, Reach]:
        why = world.why_not(self._path)
        return {DEPLOYMENT_ENV: Reach(why is None, why or f"readable at that path in {world.label}")}


def _apply(ctx: Context, config: DeploymentEnvConfig) -> None:
    registry = ctx.require(BASH_ENV)
    # The harness's own fact, a path it holds: resolved inline like bash-env's built-ins (no thread
    # hand-off per call, and no thread pool to start for it on a cold command), still shown as dsh-cli's.
    origin = ctx.fiber.origin
    registry.register(
        _Deployment(registry, config.path),
        builtin=True,
        origin=origin if isinstance(origin, EntryPointItem) else None,
    )


plugin = Plugin(name="deployment-env", apply=_apply, Config=DeploymentEnvConfig, inject=("bash_env",))
"""The ``deployment-env`` entry of the ``dsh.plugins`` group."""
