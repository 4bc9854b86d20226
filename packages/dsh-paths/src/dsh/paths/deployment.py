"""Which deployment is in effect, and why.

The one rule every ``dsh`` command, the serve socket and an embedding ``Harness`` follow:
``--deployment FILE``, else ``$DSH_DEPLOYMENT``, else ``<DSH_HOME>/deployment.yaml`` when it exists,
else the built-in one (:func:`dsh.floor.deployment_in_effect`, which the command's fenced start-up
path reads; here as a record).
"""

from collections.abc import Mapping
from typing import NamedTuple

from dsh.floor import deployment_in_effect, relative_home

__all__ = ["DeploymentChoice", "choose_deployment", "relative_home"]


class DeploymentChoice(NamedTuple):
    """Which deployment a command uses and why: ``path`` is None for the built-in one."""

    path: str | None
    reason: str


def choose_deployment(
    flag: str | None, env: Mapping[str, str] | None = None, *, cwd: str | None = None
) -> DeploymentChoice:
    """The one rule every command follows to pick its deployment (see :func:`dsh.floor.deployment_in_effect`).

    ``--deployment FILE``, else ``$DSH_DEPLOYMENT``, else ``<DSH_HOME>/deployment.yaml`` when it
    exists, else the built-in default. A relative path is read from ``cwd`` (default: this
    process's working directory; ``dsh serve`` passes its client's).
    """
    return DeploymentChoice(*deployment_in_effect(flag, env, cwd=cwd))
