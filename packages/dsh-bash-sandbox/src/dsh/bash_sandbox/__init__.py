"""The bash executor under bubblewrap: ``read-only``, ``workspace-write`` or ``full``, network on or off.

Deploy it in place of ``bash-local``: ``{id: bash-local, name: bash-sandbox, config: {mode: read-only}}``.
"""

from ._sandbox import MODES, Mode, SandboxConfig, SandboxError, SandboxExecutor, plugin

__all__ = ["MODES", "Mode", "SandboxConfig", "SandboxError", "SandboxExecutor", "plugin"]
