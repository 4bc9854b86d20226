"""dsh kernel: fibers and effects, services and plugins.

Everything a plugin registers is an effect of its fiber, so unloading the plugin removes it. The
loader (entry points, deployments) is the separate ``dsh.loader``. Importing this package does
not import pydantic: :mod:`dsh.core.validation` does, when a config must be validated.
"""

from ._contain import EscapedError, contained, containment, describe
from ._context import Context
from ._empty import EMPTY_MAPPING, ReadOnlyDict
from ._errors import DshError, FieldError, PluginError, RegistrationConflictError, ServiceConflictError
from ._fiber import Effect, Fiber, FiberState
from ._home import DSH_HOME, plugin_home
from ._plugin import Plugin, plugin_config
from ._services import Disposer, Registry, Service, ServiceKey

__all__ = [
    "DSH_HOME",
    "EMPTY_MAPPING",
    "Context",
    "Disposer",
    "DshError",
    "Effect",
    "EscapedError",
    "Fiber",
    "FiberState",
    "FieldError",
    "Plugin",
    "PluginError",
    "ReadOnlyDict",
    "RegistrationConflictError",
    "Registry",
    "Service",
    "ServiceConflictError",
    "ServiceKey",
    "contained",
    "containment",
    "describe",
    "plugin_config",
    "plugin_home",
]
