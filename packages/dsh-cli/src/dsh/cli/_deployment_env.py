"""``DSH_DEPLOYMENT`` in every managed shell: a nested ``dsh`` command uses its harness's deployment.

Managed shells never inherit the harness's own ``DSH_*`` variables, so without this a ``dsh``
command run by the model would fall back to ``<DSH_HOME>/deployment.yaml`` or the built-in
deployment and might not find the session it is part of. The agent adds this entry whenever the
deployment in effect is a file (and ``bash-env`` is loaded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dsh.bash_env import BASH_ENV, FunctionContributor
from dsh.core import Context, Plugin
from dsh.session import ToolExecution

from ._fast._choice import DEPLOYMENT_ENV


@dataclass(frozen=True, kw_only=True)
class DeploymentEnvConfig:
    """The deployment file in effect (absolute)."""

    path: str


def _apply(ctx: Context, config: DeploymentEnvConfig) -> None:
    value = {DEPLOYMENT_ENV: config.path}
    registry = ctx.require(BASH_ENV)

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        # A path on this machine: true only where the executor's child reads it there (not on a
        # remote host, not in a sandbox that hides it).
        return value if registry.world().why_not(config.path) is None else {}

    registry.register(
        FunctionContributor(
            "deployment",
            {DEPLOYMENT_ENV: "Deployment file of this harness; a dsh command run in this shell uses it too."},
            resolve,
        )
    )


plugin = Plugin(name="deployment-env", apply=_apply, Config=DeploymentEnvConfig, inject=("bash_env",))
"""The ``deployment-env`` entry of the ``dsh.plugins`` group."""
