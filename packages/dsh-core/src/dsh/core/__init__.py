"""dsh kernel: fibers and effects, services, plugins, entry-point discovery and deployments.

Everything a plugin registers is an effect of its fiber, so unloading the plugin removes it.
See the package README for the lifecycle and the entry-point groups.
"""

from ._context import Context
from ._deployment import (
    CATALOG,
    DSH_HOME,
    Deployment,
    PersistenceChoice,
    PluginEntry,
    Runtime,
    boot,
    compose,
    load_deployment,
    load_object,
    parse_deployment,
    resolve_home,
)
from ._discovery import (
    BASH_ENV_GROUP,
    GROUPS,
    PERSISTENCE_GROUP,
    PLUGINS_GROUP,
    Catalog,
    EntryPointItem,
    GroupDiff,
)
from ._errors import BootError, DeploymentError, DiscoveryError, DshError, PluginError, ServiceConflictError
from ._fiber import Disposer, Fiber, FiberState
from ._plugin import Plugin, format_validation_error
from ._services import CallerBound, ServiceKey

__all__ = [
    "BASH_ENV_GROUP",
    "CATALOG",
    "DSH_HOME",
    "GROUPS",
    "PERSISTENCE_GROUP",
    "PLUGINS_GROUP",
    "BootError",
    "CallerBound",
    "Catalog",
    "Context",
    "Deployment",
    "DeploymentError",
    "DiscoveryError",
    "Disposer",
    "DshError",
    "EntryPointItem",
    "Fiber",
    "FiberState",
    "GroupDiff",
    "PersistenceChoice",
    "Plugin",
    "PluginEntry",
    "PluginError",
    "Runtime",
    "ServiceConflictError",
    "ServiceKey",
    "boot",
    "compose",
    "format_validation_error",
    "load_deployment",
    "load_object",
    "parse_deployment",
    "resolve_home",
]
