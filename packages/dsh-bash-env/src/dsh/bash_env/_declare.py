"""Declarations of managed facts: the reserved keys, what a contributor is, and checking one."""

import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from dsh.bash import DSH_ENV_PREFIX
from dsh.paths import DEPLOYMENT_ENV
from dsh.session import ToolExecution
from dsh.session.trace import BAGGAGE, TRACEPARENT, TRACESTATE

from ._errors import ContributorError

HOME_KEY = DSH_ENV_PREFIX + "HOME"
SHELL_KEY = DSH_ENV_PREFIX + "SHELL"
SESSION_ID_KEY = DSH_ENV_PREFIX + "SESSION_ID"
TOOL_CALL_ID_KEY = DSH_ENV_PREFIX + "TOOL_CALL_ID"
TURN_ID_KEY = DSH_ENV_PREFIX + "TURN_ID"
AGENT_ID_KEY = DSH_ENV_PREFIX + "AGENT_ID"
AGENT_DEPTH_KEY = DSH_ENV_PREFIX + "AGENT_DEPTH"
PARENT_SESSION_ID_KEY = DSH_ENV_PREFIX + "PARENT_SESSION_ID"
RESERVED_KEYS = frozenset(
    {
        HOME_KEY,
        SHELL_KEY,
        SESSION_ID_KEY,
        TOOL_CALL_ID_KEY,
        TURN_ID_KEY,
        AGENT_ID_KEY,
        AGENT_DEPTH_KEY,
        PARENT_SESSION_ID_KEY,
    }
)
HARNESS_KEYS = frozenset({DEPLOYMENT_ENV})
"""Keys only dsh's own contributors (registered ``builtin=True``) declare. bash-env's ``deployment``
fact holds ``DSH_DEPLOYMENT`` only when the deployment is a file; with the built-in one no built-in
holds it, and "the first keeps a key" would hand it to any installed package, which could then point
every nested ``dsh`` command at a deployment of its choosing."""
KEY_PATTERN = re.compile(re.escape(DSH_ENV_PREFIX) + r"[A-Z][A-Z0-9_]*")
BUILTIN_OWNER = "bash-env"
BUILTIN_DISTRIBUTION = "dsh-bash-env"

MAX_VALUE_BYTES = 32 * 1024
"""Largest value (UTF-8 bytes) a contributor may return for one key.

Linux refuses any single ``KEY=value`` string over 128 KiB in a child's environment and the whole
environment and argv over about 2 MiB; 32 KiB leaves room for several large facts and the
user's own environment. Values are facts (ids, paths, regions), not payloads.
"""

MAX_SNAPSHOT_BYTES = 256 * 1024
"""Largest total (keys and values, in characters) of one call's managed variables.

Many keys each under :data:`MAX_VALUE_BYTES` could still exceed what the kernel accepts for a
child's environment; the collection fails naming the largest key instead of the exec failing later.
"""

BUILTIN_DESCRIPTIONS = {
    HOME_KEY: "Absolute path of the harness home.",
    SHELL_KEY: "Always 1: this shell was started by the harness for a model tool call.",
    SESSION_ID_KEY: "Id of the agent session that made this call (absent for calls without an agent).",
    TOOL_CALL_ID_KEY: "Id of this tool call, the call_id of its tool/call event in the transcript "
    "(absent for calls without an agent).",
    TURN_ID_KEY: "Id of the turn that made this call (absent for calls without an agent or a turn).",
    AGENT_ID_KEY: "Id of the agent that made this call: the id of its own session, as hook payloads name a "
    "subagent's agent_id (absent for calls without an agent).",
    AGENT_DEPTH_KEY: "How deep the calling agent is: 0 for a main agent, 1 for its subagents, and so on "
    "(absent for calls without an agent).",
    PARENT_SESSION_ID_KEY: "The session the calling agent answers to: the spawning session of a subagent, or "
    "the session of the outer dsh shell this run was started in (absent for a main agent of its own).",
    TRACEPARENT: "W3C trace context naming the span of this call, in the run's trace (continued from the "
    "TRACEPARENT dsh was handed, else a new trace per run); never the value dsh was handed.",
    TRACESTATE: "W3C trace state dsh was handed with a valid TRACEPARENT, passed on unchanged.",
    BAGGAGE: "W3C baggage dsh was handed, passed on unchanged.",
}


def outer_claim(environ: Mapping[str, str]) -> dict[str, str | None]:
    """What the environment a dsh run starts in says of an outer dsh: the shell it runs in was a
    call of session ``DSH_SESSION_ID``, call ``DSH_TOOL_CALL_ID``. Read once, when the run's session
    is created (``SessionStore.create(**outer_claim(environ))``), before any child is started;
    recorded as claimed (sanitised) and never handed on as this run's own values."""
    return {"outer_session": environ.get(SESSION_ID_KEY), "outer_call": environ.get(TOOL_CALL_ID_KEY)}


class VariableSpec(NamedTuple):
    """The declaration of one managed variable (an immutable ``NamedTuple``)."""

    description: str


@runtime_checkable
class Contributor(Protocol):
    """A source of managed facts: a stable name, declared keys, and a resolver."""

    @property
    def name(self) -> str:
        """Stable, unique contributor name."""
        ...

    @property
    def variables(self) -> Mapping[str, str | VariableSpec]:
        """Every key it may return, each with a description."""
        ...

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        """The values for this call; an omitted key is absent from the child."""
        ...


class FunctionContributor(NamedTuple):
    """A contributor made of a name, declarations and a function (an immutable ``NamedTuple``)."""

    name: str
    variables: Mapping[str, str | VariableSpec]
    resolver: Callable[[ToolExecution], Mapping[str, str]]

    def resolve(self, execution: ToolExecution) -> Mapping[str, str]:
        """Call the resolver."""
        return self.resolver(execution)


def validate(
    contributor: object, *, builtin: bool = False
) -> tuple[str, dict[str, str], Callable[[ToolExecution], Mapping[str, str]]]:
    name = getattr(contributor, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise ContributorError(f"contributor {contributor!r} has a blank or missing name")
    resolve = getattr(contributor, "resolve", None)
    if not callable(resolve):
        raise ContributorError(f"contributor '{name}' has no callable resolve", contributor=name)
    variables = getattr(contributor, "variables", None)
    if not isinstance(variables, Mapping) or not variables:
        raise ContributorError(f"contributor '{name}' declares no variables", contributor=name)
    descriptions: dict[str, str] = {}
    for key, spec in variables.items():
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            raise ContributorError(
                f"contributor '{name}' declares key {key!r}, which is not {DSH_ENV_PREFIX} followed by "
                "an upper-case letter and upper-case letters, digits or underscores",
                contributor=name,
                key=key,
            )
        if key in RESERVED_KEYS:
            raise ContributorError(
                f"contributor '{name}' declares key '{key}', which is reserved for the harness",
                contributor=name,
                key=key,
            )
        if key in HARNESS_KEYS and not builtin:
            raise ContributorError(
                f"contributor '{name}' declares key '{key}', which only dsh itself sets (the deployment "
                "file of the harness); remove it from the contributor's variables",
                contributor=name,
                key=key,
            )
        description = spec.description if isinstance(spec, VariableSpec) else spec
        if isinstance(spec, Mapping):
            description = spec.get("description")
        if not isinstance(description, str) or not description.strip():
            raise ContributorError(
                f"contributor '{name}' gives key '{key}' a blank description", contributor=name, key=key
            )
        descriptions[key] = description
    return name, descriptions, resolve


def as_contributor(obj: Any) -> Contributor:
    """An entry point's object as a contributor: the object itself, or what a zero-argument callable returns."""
    # A class has the contributor attributes too, but only its instances can resolve.
    if not isinstance(obj, type) and hasattr(obj, "resolve") and hasattr(obj, "variables"):
        return obj  # type: ignore[no-any-return]
    if callable(obj):
        made = obj()
        if hasattr(made, "resolve") and hasattr(made, "variables"):
            return made  # type: ignore[no-any-return]
        raise ContributorError(f"{obj!r} returned {made!r}, which is not a contributor")
    raise ContributorError(f"{obj!r} is neither a contributor nor a callable returning one")
