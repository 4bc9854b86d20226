"""The registry of managed ``DSH_*`` facts that every model shell call receives.

Load the ``bash-env`` plugin, then use ``ctx.get(BASH_ENV)``: ``register`` a contributor
(an effect of your plugin's fiber), ``collect`` a per-call snapshot, ``list`` the catalogue.
"""

from ._declare import (
    AGENT_DEPTH_KEY,
    AGENT_ID_KEY,
    PARENT_SESSION_ID_KEY,
    SESSION_ID_KEY,
    TOOL_CALL_ID_KEY,
    TURN_ID_KEY,
    Contributor,
    FunctionContributor,
    VariableSpec,
    outer_claim,
)
from ._errors import CollectionError, ContributorError
from ._plugin import BASH_ENV_GROUP, SESSION_JSONL_KEY, BashEnvConfig, plugin
from ._registry import BASH_ENV, BashEnvRegistry, Reach, VariableInfo
from ._resolve import Snapshot

__all__ = [
    "AGENT_DEPTH_KEY",
    "AGENT_ID_KEY",
    "BASH_ENV",
    "BASH_ENV_GROUP",
    "PARENT_SESSION_ID_KEY",
    "SESSION_ID_KEY",
    "SESSION_JSONL_KEY",
    "TOOL_CALL_ID_KEY",
    "TURN_ID_KEY",
    "BashEnvConfig",
    "BashEnvRegistry",
    "CollectionError",
    "Contributor",
    "ContributorError",
    "FunctionContributor",
    "Reach",
    "Snapshot",
    "VariableInfo",
    "VariableSpec",
    "outer_claim",
    "plugin",
]
