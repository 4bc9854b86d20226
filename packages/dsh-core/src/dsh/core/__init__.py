"""dsh kernel: fibers and effects, services and plugins.

Everything a plugin registers is an effect of its fiber, so unloading the plugin removes it. The
loader (entry points, deployments) is the separate ``dsh.loader``.
"""

from ._contain import EscapedError, contained, describe
from ._context import Context
from ._errors import DshError, PluginError, ServiceConflictError
from ._fiber import Effect, Fiber, FiberState
from ._home import DSH_HOME, plugin_home
from ._plugin import Plugin, field_path, format_validation_error, plain_error
from ._services import Disposer, Service, ServiceKey

__all__ = [
    "DSH_HOME",
    "Context",
    "Disposer",
    "DshError",
    "Effect",
    "EscapedError",
    "Fiber",
    "FiberState",
    "Plugin",
    "PluginError",
    "Service",
    "ServiceConflictError",
    "ServiceKey",
    "contained",
    "describe",
    "field_path",
    "format_validation_error",
    "plain_error",
    "plugin_home",
]
