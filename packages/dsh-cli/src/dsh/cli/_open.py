"""How the ``dsh`` command opens a runtime: :func:`dsh.harness.open_runtime` with the command's start-up memos.

Every verb that boots the deployment in effect opens it here, so a command finds the installed entry
points and the validated forms an earlier command learnt (``<home>/run``, see :mod:`dsh.cli_fast._memos`)
instead of importing :mod:`importlib.metadata`, yaml and pydantic. ``dsh serve`` and embedders use the
library's plain defaults.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from dsh.cli_fast._memos import CommandMemos
from dsh.harness import open_runtime as open_plain
from dsh.loader import Deployment, LoopLimits, ModelChoice, PersistenceChoice, PluginEntry, Runtime
from dsh.paths.deployment import DeploymentChoice

RECORDS = {cls.__name__: cls for cls in (Deployment, PersistenceChoice, PluginEntry, ModelChoice, LoopLimits)}
"""The record classes the validation memo rebuilds a deployment with (by the names ``DEPLOYMENT_RECORDS`` lists)."""

MEMOS = CommandMemos(RECORDS)
"""The command's memos, in the home of each runtime it opens."""


def open_runtime(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    choice: DeploymentChoice | None = None,
) -> Runtime:
    """:func:`dsh.harness.open_runtime` with :data:`MEMOS`."""
    return open_plain(path, env=env, check=check, choice=choice, memos=MEMOS)
