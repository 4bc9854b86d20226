"""dsh loader: entry-point discovery attributed to distributions, deployments, composition and boot.

The kernel (``dsh.core``) knows nothing of entry points, files, pydantic or signals; this package
finds plugins through the ``dsh.*`` entry-point groups, reads deployment files and loads them into a
kernel made by :func:`root`: plugin configs validated with pydantic (:mod:`dsh.loader.validation`),
plugin code contained (:func:`contained`, :func:`containment`). Discovery reads
:mod:`importlib.metadata` and validation runs pydantic unless a caller hands in a memo
(:class:`EntryPointMemo`, :class:`ValidationMemo`) that answers for them.
"""

from __future__ import annotations

from ._contain import contained, containment
from ._deployment import (
    Deployment,
    LoopLimits,
    ModelChoice,
    PersistenceChoice,
    PluginEntry,
    ValidationMemo,
    load_deployment,
    parse_deployment,
    resolve_home,
)
from ._discovery import PLUGINS_GROUP, Catalog, EntryPointItem, EntryPointMemo, Fingerprint, GroupDiff, Lost, Row
from ._errors import BootError, DeploymentError, DiscoveryError
from ._follow import follow_group
from ._runtime import (
    CATALOG,
    LOOP_LIMITS,
    MODEL_ENTRY,
    MODELS_GROUP,
    TURN_REFRESH,
    Runtime,
    boot,
    compose,
    root,
    validate_config,
)

__all__ = [
    "CATALOG",
    "LOOP_LIMITS",
    "MODELS_GROUP",
    "MODEL_ENTRY",
    "PLUGINS_GROUP",
    "TURN_REFRESH",
    "BootError",
    "Catalog",
    "Deployment",
    "DeploymentError",
    "DiscoveryError",
    "EntryPointItem",
    "EntryPointMemo",
    "Fingerprint",
    "GroupDiff",
    "LoopLimits",
    "Lost",
    "ModelChoice",
    "PersistenceChoice",
    "PluginEntry",
    "Row",
    "Runtime",
    "ValidationMemo",
    "boot",
    "compose",
    "contained",
    "containment",
    "follow_group",
    "load_deployment",
    "parse_deployment",
    "resolve_home",
    "root",
    "validate_config",
]
