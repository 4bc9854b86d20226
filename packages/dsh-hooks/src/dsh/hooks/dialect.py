"""The hook-dialect contract, for a distribution that adds a peer's hooks (``dsh.hook_dialects``).

Subclass :class:`HookDialect`, set what your peer does differently, and name an instance in your
distribution's ``dsh.hook_dialects`` entry points. ``docs/extension-points/hook-dialects.md`` is the
contract; the Gemini CLI dialect (dsh-hooks-gemini) is a complete example.

The stages a dialect's tests drive are here too: :func:`load_dialect` / :func:`loaded` (what the hooks plugin
does for each entry), :func:`load_hook_table` (a file or object in the peer's format),
:func:`select_hooks` (which hooks an event runs) and :func:`build_payload` (a hook's stdin).
"""

from ._decision import interpret as default_interpret
from ._dialect import (
    DIALECT_GROUP,
    HookDialect,
    TranscriptViews,
    dialect_of,
    dialects,
    load_dialect,
    loaded,
    register_dialect,
)
from ._load import load_hook_table
from ._outcome import HookReport
from ._payload import HookFacts, build_payload
from ._select import select_hooks
from ._table import HookCommand, HookTable

__all__ = [
    "DIALECT_GROUP",
    "HookCommand",
    "HookDialect",
    "HookFacts",
    "HookReport",
    "HookTable",
    "TranscriptViews",
    "build_payload",
    "default_interpret",
    "dialect_of",
    "dialects",
    "load_dialect",
    "load_hook_table",
    "loaded",
    "register_dialect",
    "select_hooks",
]
