"""What a hook dialect is: everything one peer's hooks do differently, asked for by the stages.

The stages (loading, tables and matchers, selection, payloads, running, reading decisions, the
service) name no peer: each asks the dialect of the hook at hand, a :class:`HookDialect` found by
name with :func:`dialect_of`. A dialect module (one per peer) subclasses it and sets what differs:
the events and handler fields its files may hold, its matcher rule, its tool names and payload
shapes, its environment variables, and how its exit codes and JSON are read. The defaults here are
the plainest reading (regular-expression matchers, dsh's own tool names, every hook run), so a
dialect states only where its peer departs from them. A third peer is one more module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from dsh.core import Context
    from dsh.session import SessionEvent, SessionHeader

    from ._table import HookCommand, HookTable

Dialect = str
"""A dialect's name: its key in the hooks config and in every report (see :func:`dialect_names`)."""


class TranscriptViews(Protocol):
    """Views of sessions in a dialect's own transcript format, kept for the hooks that read them."""

    def path_for(self, header: SessionHeader) -> Path:
        """Where the view of ``header``'s session lives."""
        ...

    def update(self, header: SessionHeader, events: Callable[[], Sequence[SessionEvent]]) -> str:
        """Bring the view up to ``events()``; its path. Raises ``OSError`` when it cannot be written."""
        ...

    def forget(self, session_id: str) -> None:
        """Drop what is remembered of a session's view."""
        ...


class HookDialect:
    """One peer's hooks: the facts and readings that differ between peers (see the module docstring)."""

    name: Dialect = ""
    """The config key (``hooks.<name>``) and how reports name the dialect."""
    peer: str = ""
    """The peer's own name, for messages."""

    # -- what its files may hold ---------------------------------------------------------------
    events: frozenset[str] = frozenset()
    """Every event the peer documents; a hook of another event name is a warning (a typo)."""
    handler_types: frozenset[str] = frozenset({"command"})
    """Handler types the peer documents; dsh runs ``command`` and skips the others with a warning."""
    command_fields: frozenset[str] = frozenset({"type", "command", "timeout", "async", "statusMessage"})
    """Fields of a command handler, in the peer's spelling; any other is a warning."""
    timeout_fields: tuple[str, ...] = ("timeout",)
    """Where a handler's timeout (seconds) may be given, first found wins."""
    min_timeout: float = 0.0
    """A shorter positive timeout is raised to this."""
    async_fields: tuple[str, ...] = ("async",)
    """Handler fields that, when true, make a hook run detached."""

    def disabled(self, raw: Mapping[str, Any]) -> bool:
        """Whether a hook file turns all its hooks off."""
        return False

    def command_extras(self, raw: Mapping[str, Any], bad: Callable[[str], None]) -> dict[str, Any] | None:
        """The :class:`HookCommand` fields the peer's handler adds beyond command, timeout and async;
        None (after calling ``bad`` with why) when one is invalid and the hook must be skipped."""
        return {}

    # -- matching and selection ----------------------------------------------------------------
    exact_name_matchers: bool = False
    """A matcher of only letters, digits, ``_`` and ``|`` is a list of exact names (else every
    matcher is an unanchored regular expression)."""
    runs_duplicates_once: bool = False
    """Identical command hooks of one event run once (:attr:`HookCommand.identity`)."""

    def condition_applies(
        self, hook: HookCommand, event: str, tool: str | None, tool_input: Mapping[str, Any] | None
    ) -> bool:
        """Whether ``hook``'s own condition (if the peer has such a field) lets it run for this event."""
        return True

    # -- names ---------------------------------------------------------------------------------
    tool_names: Mapping[str, str] = {}
    """dsh's tool names as the peer calls them; others pass through unchanged."""
    tool_aliases: Mapping[str, tuple[str, ...]] = {}
    """Older names a matcher may still use for a peer tool name."""
    known_tools: frozenset[str] = frozenset()
    """Tool names a matcher may sensibly name (a matcher close to none of them is likely a typo)."""
    failed_tool_event: str = "PostToolUse"
    """The event fired after a failed call."""
    env_file_names: tuple[str, ...] = ()
    """The variables that name a SessionStart hook's env file."""
    placeholders: tuple[str, ...] = ()
    """``${NAME}`` placeholders substituted in an exec form's command and arguments."""

    def hook_env(self, hook: HookCommand, header: SessionHeader) -> dict[str, str]:
        """What the peer sets in a hook's environment for a session."""
        return {}

    # -- payloads ------------------------------------------------------------------------------
    event_keys: Mapping[str, frozenset[str]] = {}
    """The events dsh fires in this dialect, with the payload keys each may carry."""
    omits_nulls: bool = False
    """An optional key without a value is left out (else sent as ``null``; ``agent_id`` and
    ``agent_type`` are always left out then)."""

    def path_value(self, path: str | None) -> str | None:
        """A transcript path as the payload carries it (None: the session has no local file)."""
        return path

    def tool_input(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A call's arguments as the peer's tool would have taken them."""
        return dict(arguments)

    def dsh_input(self, tool: str, peer_input: Mapping[str, Any]) -> dict[str, Any]:
        """The inverse of :meth:`tool_input`: a hook's ``updatedInput`` in dsh's terms."""
        return dict(peer_input)

    def tool_response(self, tool: str, response: Mapping[str, Any]) -> dict[str, Any]:
        """A call's result as the peer's tool reports it."""
        return dict(response)

    def stop_error(self, kind: str) -> str:
        """A ``StopFailure`` category (dsh tells ``rate_limit``, ``overloaded``, ...) as the peer names it."""
        return kind

    def transcript_views(self, home: Path, model: str) -> TranscriptViews | None:
        """Views of sessions in the peer's own transcript format, if hooks of this dialect may get one."""
        return None

    def wants_view(self, hook: HookCommand, mode: str) -> bool:
        """Whether ``hook`` is handed the transcript view under the config's ``mode`` (``plugins``,
        ``all``, ``off``)."""
        return False

    # -- exit codes and JSON -------------------------------------------------------------------
    blocks_without_reason: bool = True
    """Exit 2 blocks even with nothing on stderr."""
    invalid_json_fails: bool = False
    """Stdout that starts like JSON but is not fails the hook (else it is plain text)."""
    reserved_answer_fails_closed: bool = False
    """A PermissionRequest answer with a field the peer reserves (``updatedInput``,
    ``updatedPermissions``, ``interrupt``) refuses the call."""

    # -- configuration -------------------------------------------------------------------------
    def extra_tables(self, ctx: Context, config: Any, base: Path | None, home: Path | None) -> list[HookTable]:
        """Hook tables the dialect loads beyond its hooks file (the config's other keys for it)."""
        return []


_KNOWN: dict[Dialect, HookDialect] = {}


def dialects() -> tuple[HookDialect, ...]:
    """Every dialect, in the order their hooks run and are reported."""
    if not _KNOWN:
        from . import _claude, _codex  # the dialect modules

        for module in (_claude, _codex):
            _KNOWN[module.DIALECT.name] = module.DIALECT
    return tuple(_KNOWN.values())


def dialect_names() -> tuple[Dialect, ...]:
    """Every dialect's name (its key in the hooks config)."""
    return tuple(d.name for d in dialects())


def dialect_of(name: Dialect) -> HookDialect:
    """The dialect called ``name``; a name no dialect has is a ``ValueError`` listing the known ones."""
    if not _KNOWN:
        dialects()
    found = _KNOWN.get(name)
    if found is None:
        raise ValueError(f"no hook dialect named {name!r}; dialects: {', '.join(_KNOWN)}")
    return found


def all_placeholders() -> tuple[str, ...]:
    """Every dialect's ``${NAME}`` placeholders, each once."""
    return tuple(dict.fromkeys(p for d in dialects() for p in d.placeholders))
