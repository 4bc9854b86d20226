"""The harness home as a plugin sees it: one home per deployment, whatever a plugin's own config says."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dsh.core import PluginError, ServiceKey
from dsh.paths import resolve_dsh_home

if TYPE_CHECKING:
    from dsh.core import Context

DSH_HOME: ServiceKey[Path] = ServiceKey("dsh_home")
"""The harness home: resolved once per deployment by the loader, read by every plugin that needs it."""


def plugin_home(ctx: Context, configured: str | None = None) -> Path:
    """The home a plugin uses: the ``dsh_home`` service of its deployment.

    A plugin's own ``dsh_home`` setting must resolve to that same path (one home, routed to
    every consumer); a different one fails the plugin naming both. A plugin loaded without a
    deployment uses its setting, else ``$DSH_HOME``, else ``~/.dsh``.
    """
    own = resolve_dsh_home(configured) if configured and configured.strip() else None
    home = ctx.get(DSH_HOME)
    if home is None:
        return own or resolve_dsh_home()
    if own is not None and own != home:
        label = ctx.fiber.label
        raise PluginError(
            f"plugin '{label}': config.dsh_home resolves to {own} but the deployment's home is {home}; "
            "configure one harness home",
            plugin=label,
        )
    return home
