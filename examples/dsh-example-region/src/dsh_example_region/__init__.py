"""An example third-party contributor of a managed ``DSH_*`` fact.

Installing this distribution is all it takes: its ``dsh.bash_env`` entry point names
:class:`RegionContributor` (a zero-argument callable returning a contributor), which
bash-env loads in its own fiber. Uninstalling it and refreshing removes the key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel

from dsh.core import Context, Plugin, ServiceKey
from dsh.session import ToolExecution

__all__ = ["REGION", "RegionContributor", "plugin"]

REGION_ENV = "EXAMPLE_REGION"
"""Harness-side variable naming the region; the default is ``eu-example-1``."""


def current_region() -> str:
    """The region this harness runs in."""
    return os.environ.get(REGION_ENV) or "eu-example-1"


class RegionContributor:
    """Contributes ``DSH_EXAMPLE_REGION`` to every shell call."""

    name = "example-region"
    variables: Mapping[str, str] = {"DSH_EXAMPLE_REGION": "Deployment region of this harness (example contributor)."}

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        """The region, for every call (with or without an agent)."""
        return {"DSH_EXAMPLE_REGION": current_region()}


REGION: ServiceKey[str] = ServiceKey("example_region")


class RegionConfig(BaseModel):
    """Config of the ``example-region`` plugin."""

    region: str | None = None


def _apply(ctx: Context, config: RegionConfig) -> None:
    ctx.provide(REGION, config.region or current_region())


plugin = Plugin(name="example-region", apply=_apply, Config=RegionConfig)
"""A deployment plugin providing the region as the ``example_region`` service."""
