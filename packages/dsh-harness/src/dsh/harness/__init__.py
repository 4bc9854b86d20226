"""dsh for a Python program: compose a deployment, boot it, hand out sessions and turns.

The embedding front door (:class:`Harness`, :class:`HarnessSession`, :class:`HarnessTurn`), the
default deployment every host layers a deployment on (:func:`default_deployment`), booting the
deployment in effect (:func:`open_runtime`), and a long-lived host's runtime that boots again when
its files change (:class:`LiveRuntime`). The ``dsh`` command (dsh-cli) and ``dsh mcp`` (dsh-mcp)
are built on this library; it knows nothing of command lines.
"""

from __future__ import annotations

from ._harness import DeploymentSource, Harness, HarnessSession, HarnessTurn, notice_line
from ._live import LiveRuntime
from ._runtime import (
    DEFAULT_IDS,
    DEFAULT_SOURCE,
    StartupMemos,
    boot_layered,
    default_deployment,
    default_plugins,
    layer_on_defaults,
    layered,
    open_runtime,
    warnings,
)

__all__ = [
    "DEFAULT_IDS",
    "DEFAULT_SOURCE",
    "DeploymentSource",
    "Harness",
    "HarnessSession",
    "HarnessTurn",
    "LiveRuntime",
    "StartupMemos",
    "boot_layered",
    "default_deployment",
    "default_plugins",
    "layer_on_defaults",
    "layered",
    "notice_line",
    "open_runtime",
    "warnings",
]
