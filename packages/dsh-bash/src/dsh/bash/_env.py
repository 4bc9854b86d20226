"""The managed ``DSH_*`` namespace and the child-environment recipe."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final, Literal

from dsh.session.trace import CARRIER_NAMES

from ._errors import ChannelError

DSH_ENV_PREFIX: Final = "DSH_"
"""The one source of the managed prefix; every other use derives from it."""

Shell = Literal["bash", "pwsh"]

DEFAULT_CREDENTIAL_PATTERN: Final = r"KEY|SECRET|TOKEN|PASSWORD"
"""Ambient variable names matching this (case-insensitively) never reach a child."""

SHELL_CODE_KEYS: Final = frozenset({"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4"})
"""Ambient names that make a non-interactive shell run code of the environment's choosing before or
around the command: a start-up file (bash's ``BASH_ENV``, sh's ``ENV``), options bash imports at
start-up (``SHELLOPTS=xtrace``, ``BASHOPTS``) and the trace prompt they expand (``PS4`` may hold
``$((DSH_SHELL=0))``). Any of them could rewrite ``DSH_*`` after the snapshot is set, in the child
and in every bash it starts, so they never pass from the ambient environment."""
EXPORTED_FUNCTION_PREFIX: Final = "BASH_FUNC_"
"""Ambient names bash imports as functions (``BASH_FUNC_printenv%%``): one could stand in for any
command the child runs (``printenv``, ``env``), so none passes from the ambient environment."""

_IDENTITY: dict[str, int] = {}
"""The peer harnesses' identity variables now declared, each with how many declarations hold it."""


def harness_identity_keys() -> frozenset[str]:
    """Ambient names by which a peer harness (Claude Code, Codex, Gemini CLI: the hook dialects loaded)
    tells its children which session, project, plugin or env file they belong to.

    In dsh's process they can only be an outer harness's, so none passes from the ambient environment:
    a command of a dsh session is not the outer session's, and a hook gets its own dialect's values
    through the ``env`` channel. dsh-bash names no peer: each hook dialect declares its variables
    (:func:`declare_harness_identity`) while it is loaded. (``CLAUDECODE=1`` passes: it says a Claude
    Code is somewhere above, which stays true, and names no session.)
    """
    return frozenset(_IDENTITY)


def declare_harness_identity(names: Iterable[str]) -> Callable[[], None]:
    """Keep ``names`` out of every child's ambient environment until the returned disposer is called
    (idempotent). Declarations of one name add up: it passes again only when all are disposed."""
    held = tuple(dict.fromkeys(names))
    for name in held:
        if not isinstance(name, str) or not name or "=" in name:
            raise ValueError(f"a harness identity variable must be a non-empty name without '=', not {name!r}")
    for name in held:
        _IDENTITY[name] = _IDENTITY.get(name, 0) + 1
    _VERDICTS.clear()
    done = False

    def dispose() -> None:
        nonlocal done
        if done:
            return
        done = True
        for name in held:
            count = _IDENTITY.get(name, 0) - 1
            if count > 0:
                _IDENTITY[name] = count
            else:
                _IDENTITY.pop(name, None)
        _VERDICTS.clear()

    return dispose


TERMINAL_ENV: Final[Mapping[str, str]] = {"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}
"""Settings for a non-interactive child; pwsh gets them without ``TERM``."""

_PREFIX_LEN = len(DSH_ENV_PREFIX)
_PREFIX_UPPER = DSH_ENV_PREFIX.upper()


def is_managed_key(name: str) -> bool:
    """True when ``name`` is managed: in the ``DSH_*`` namespace or a trace-context carrier
    (``TRACEPARENT``, ``TRACESTATE``, ``BAGGAGE``: :data:`dsh.session.trace.CARRIER_NAMES`), in any
    letter case. A child gets managed variables from the snapshot only, never from the ambient
    environment: a trace context handed to dsh is continued, each child getting its own call's span."""
    return name[:_PREFIX_LEN].upper() == _PREFIX_UPPER or name.upper() in CARRIER_NAMES


def compile_credential_pattern(pattern: str | None = DEFAULT_CREDENTIAL_PATTERN) -> re.Pattern[str] | None:
    """Compile a credential-name pattern (case-insensitive); None or blank disables scrubbing."""
    return re.compile(pattern, re.IGNORECASE) if pattern else None


def check_channels(env: Mapping[str, str], dsh_env: Mapping[str, str]) -> None:
    """Reject a managed key in ``env`` or an unmanaged key in ``dsh_env``, naming the key and channel."""
    for key in env:
        if is_managed_key(key):
            raise ChannelError(
                f"environment key '{key}' is "
                + ("a trace-context carrier, managed like" if key.upper() in CARRIER_NAMES else "in")
                + f" the managed {DSH_ENV_PREFIX}* namespace; pass it through the dsh_env channel, not env",
                key=key,
                channel="env",
            )
    for key in dsh_env:
        if not key.startswith(DSH_ENV_PREFIX) and key not in CARRIER_NAMES:
            raise ChannelError(
                f"dsh_env key '{key}' does not start with {DSH_ENV_PREFIX} and is no trace-context carrier "
                f"({', '.join(sorted(CARRIER_NAMES))}); pass it through the env channel",
                key=key,
                channel="dsh_env",
            )


_MAX_VERDICTS = 4096
_VERDICTS: dict[re.Pattern[str] | None, dict[str, bool]] = {}
"""Per credential pattern, whether an ambient name passes: the same few dozen names come at every
call, and testing each against the pattern costs more than building the rest of the environment."""


def _verdicts(credentials: re.Pattern[str] | None) -> dict[str, bool]:
    passes = _VERDICTS.get(credentials)
    if passes is None:
        if len(_VERDICTS) >= 16:  # patterns made anew without end: forget the old ones
            _VERDICTS.clear()
        passes = _VERDICTS[credentials] = {}
    return passes


def _passes(name: str, credentials: re.Pattern[str] | None) -> bool:
    """Whether an ambient ``name`` reaches a child: not managed, not shell code, no harness's identity,
    not credential-shaped."""
    return (
        not is_managed_key(name)
        and name not in SHELL_CODE_KEYS
        and name not in _IDENTITY
        and not name.startswith(EXPORTED_FUNCTION_PREFIX)
        and (credentials is None or not credentials.search(name))
    )


def build_child_env(
    ambient: Mapping[str, str],
    env: Mapping[str, str],
    dsh_env: Mapping[str, str],
    *,
    shell: Shell = "bash",
    credentials: re.Pattern[str] | None = None,
) -> dict[str, str]:
    """Build a child's environment, in order:

    1. ``ambient`` minus every managed key (any case), credential-shaped names, the variables that
       make bash run code of their choosing (:data:`SHELL_CODE_KEYS`) and exported functions
       (:data:`EXPORTED_FUNCTION_PREFIX`);
    2. non-interactive terminal settings (no ``TERM`` for pwsh);
    3. the ordinary ``env`` entries;
    4. the managed ``dsh_env`` snapshot, last, so the child's ``DSH_*`` and trace-context variables
       (``TRACEPARENT``, ``TRACESTATE``, ``BAGGAGE``) are exactly the snapshot.
    """
    check_channels(env, dsh_env)
    passes = _verdicts(credentials)
    child = {}
    for key, value in ambient.items():
        ok = passes.get(key)
        if ok is None:
            ok = _passes(key, credentials)
            if len(passes) >= _MAX_VERDICTS:  # an ambient environment of ever new names: start again
                passes.clear()
            passes[key] = ok
        if ok:
            child[key] = value
    for key, value in TERMINAL_ENV.items():
        if not (shell == "pwsh" and key == "TERM"):
            child[key] = value
    if shell == "pwsh":
        child.pop("TERM", None)
    child.update(env)
    child.update(dsh_env)
    return child
