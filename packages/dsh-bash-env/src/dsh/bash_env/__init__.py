"""The registry of managed ``DSH_*`` facts that every model shell call receives.

Load the ``bash-env`` plugin, then use ``ctx.get(BASH_ENV)``: ``register`` a contributor
(an effect of your plugin's fiber), ``collect`` a per-call snapshot, ``list`` the catalogue.
"""

from ._errors import CollectionError, ContributorError
from ._plugin import BASH_ENV_GROUP, SESSION_JSONL_KEY, BashEnvConfig, PersistenceTranslator, plugin
from ._registry import (
    BASH_ENV,
    BUILTIN_OWNER,
    DEFAULT_RESOLVE_TIMEOUT,
    HOME_KEY,
    KEY_PATTERN,
    MAX_OVERDUE,
    MAX_VALUE_BYTES,
    RESERVED_KEYS,
    SESSION_ID_KEY,
    SHELL_KEY,
    TOOL_CALL_ID_KEY,
    TURN_ID_KEY,
    BashEnvRegistry,
    Contributor,
    FunctionContributor,
    VariableInfo,
    VariableSpec,
    as_contributor,
)

__all__ = [
    "BASH_ENV",
    "BASH_ENV_GROUP",
    "BUILTIN_OWNER",
    "DEFAULT_RESOLVE_TIMEOUT",
    "HOME_KEY",
    "KEY_PATTERN",
    "MAX_OVERDUE",
    "MAX_VALUE_BYTES",
    "RESERVED_KEYS",
    "SESSION_ID_KEY",
    "SESSION_JSONL_KEY",
    "SHELL_KEY",
    "TOOL_CALL_ID_KEY",
    "TURN_ID_KEY",
    "BashEnvConfig",
    "BashEnvRegistry",
    "CollectionError",
    "Contributor",
    "ContributorError",
    "FunctionContributor",
    "PersistenceTranslator",
    "VariableInfo",
    "VariableSpec",
    "as_contributor",
    "plugin",
]
