"""dsh kernel: fibers and effects, contexts, services, plugins and errors.

Everything a plugin registers is an effect of its fiber, so unloading the plugin removes it. The
loader (entry points, deployments, config validation with pydantic, containment of plugin code) is
the separate ``dsh.loader``: the kernel names no validation library and reaches it through the
``validate`` and ``guard`` a root is made with.
"""

from ._context import Context
from ._errors import (
    DshError,
    EscapedError,
    FieldError,
    PluginError,
    RegistrationConflictError,
    ServiceConflictError,
    describe,
)
from ._fiber import Effect, Fiber, FiberState, Guard
from ._plugin import ConfigValidator, Plugin, plugin_config
from ._services import Disposer, Registry, Service, ServiceKey

__all__ = [
    "ConfigValidator",
    "Context",
    "Disposer",
    "DshError",
    "Effect",
    "EscapedError",
    "Fiber",
    "FiberState",
    "FieldError",
    "Guard",
    "Plugin",
    "PluginError",
    "RegistrationConflictError",
    "Registry",
    "Service",
    "ServiceConflictError",
    "ServiceKey",
    "describe",
    "plugin_config",
]
