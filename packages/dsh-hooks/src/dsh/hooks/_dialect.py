"""What a hook dialect is: everything one peer's hooks do differently, asked for by the stages.

The stages (loading, tables and matchers, selection, payloads, running, reading decisions, the
service) name no peer: each asks the dialect of the hook at hand, a :class:`HookDialect` found by
name with :func:`dialect_of`. A dialect module (one per peer) subclasses it and sets what differs:
the events and handler fields its files may hold, its matcher rule, its tool names and payload
shapes, its environment variables, and how its exit codes and JSON are read. The defaults here are
the plainest reading (regular-expression matchers, dsh's own tool names, every hook run), so a
dialect states only where its peer departs from them.

Dialects are plugins: each is an entry of the ``dsh.hook_dialects`` group (Claude Code and Codex are
dsh-hooks' own entries, found like any third party's), loaded by the hooks plugin in a child fiber
that registers it here (:func:`register_dialect`) for as long as the fiber lives. The contract a
dialect meets is ``docs/extension-points/hook-dialects.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from dsh.core import Context
    from dsh.session import SessionEvent, SessionHeader

    from ._outcome import HookReport
    from ._payload import HookFacts
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
    hooks_file: str = ""
    """Its hooks file under ``<DSH_HOME>/hooks/`` (default ``<name>.json``), read when the config gives
    the dialect no source of its own and asks for the home's files (``home_files``)."""
    identity_variables: frozenset[str] = frozenset()
    """The variables by which the peer tells its children which session, project, plugin or env file
    they belong to. In dsh's process they can only be an outer harness's, so no child started through
    dsh-bash inherits them from the ambient environment while the dialect is loaded; the dialect sets
    its own values in its hooks' environment (:meth:`hook_env`)."""

    def file_name(self) -> str:
        """:attr:`hooks_file`, or ``<name>.json``."""
        return self.hooks_file or f"{self.name}.json"

    def peer_event(self, point: str) -> str | None:
        """The peer's event for one of dsh's hook points (named as Claude Code and Codex name them:
        ``PreToolUse``, ``Stop``, ..., and ``BeforeModel`` / ``AfterModel``); None: the peer has none."""
        return point if point in self.event_keys else None

    # -- what its files may hold ---------------------------------------------------------------
    events: frozenset[str] = frozenset()
    """Every event the peer documents; a hook of another event name is a warning (a typo)."""
    handler_types: frozenset[str] = frozenset({"command"})
    """Handler types the peer documents; dsh runs ``command`` and skips the others with a warning."""
    command_fields: frozenset[str] = frozenset({"type", "command", "timeout", "async", "statusMessage"})
    """Fields of a command handler, in the peer's spelling; any other is a warning."""
    timeout_fields: tuple[str, ...] = ("timeout",)
    """Where a handler's timeout may be given, first found wins."""
    timeout_unit: float = 1.0
    """Seconds per unit of a handler's timeout (0.001 for a peer that counts milliseconds)."""
    default_timeout: float = 600.0
    """Seconds a command hook may run when its timeout is absent."""
    group_fields: frozenset[str] = frozenset({"matcher", "hooks"})
    """Fields of a matcher group, in the peer's spelling; any other is a warning."""
    gate_events: frozenset[str] = frozenset({"PreToolUse", "UserPromptSubmit"})
    """The peer's events whose hooks decide whether something happens at all: a hook whose verdict
    cannot be read there (it could not start, its status was lost, its output was too long) refuses."""
    blocking_events: frozenset[str] = frozenset(
        {"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure", "PostToolBatch"}
        | {"UserPromptSubmit", "Stop", "SubagentStop"}
    )
    """The peer's events where exit 2 or a ``block`` decision acts (the default :meth:`interpret`);
    elsewhere exit 2 is only reported."""
    context_events: frozenset[str] = frozenset({"SessionStart", "UserPromptSubmit"})
    """The peer's events whose plain (non-JSON) stdout is context for the model (the default :meth:`interpret`)."""
    tool_events: frozenset[str] = frozenset(
        {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "PermissionDenied"}
    )
    """The peer's events whose matcher is matched against a tool name."""
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

    def matches(self, matcher: str, subjects: Sequence[str], event: str) -> bool:
        """Whether a matcher that is not ``*`` or empty matches one of ``subjects`` of ``event``.

        The default: with :attr:`exact_name_matchers`, a matcher of only letters, digits, ``_`` and
        ``|`` is a list of exact names; every other matcher is an unanchored regular expression, and
        an invalid one never matches.
        """
        from ._table import exact_names

        if self.exact_name_matchers and exact_names(matcher):
            return any(value in matcher.split("|") for value in subjects)
        import re

        try:
            pattern = re.compile(matcher)
        except re.error:
            return False
        return any(pattern.search(value) is not None for value in subjects)

    def invalid_matcher(self, matcher: str) -> str | None:
        """Why ``matcher`` can never match (its regular expression's error), or None."""
        from ._table import exact_names

        if self.exact_name_matchers and exact_names(matcher):
            return None
        import re

        try:
            re.compile(matcher)
        except re.error as exc:
            return str(exc)
        return None

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

    def extra_fields(self, event: str, facts: HookFacts) -> dict[str, Any]:
        """Payload keys the peer sends that dsh's facts do not hold as such (a timestamp, the turn's
        prompt); they join the payload before the event's keys are kept (:attr:`event_keys`)."""
        return {}

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

    def interpret(
        self,
        event: str,
        command: str,
        exit_code: int,
        stdout: str,
        stderr: str,
        tool: str | None = None,
        tool_input: Mapping[str, Any] | None = None,
    ) -> HookReport:
        """A finished hook's exit code and output as a report (``tool_input``: the call's input as the
        peer's tool took it). The default reads them as Claude Code and Codex do, tuned by the flags
        above; a peer with other rules overrides this."""
        from ._decision import interpret

        return interpret(self.name, event, command, exit_code, stdout, stderr, tool)

    # -- configuration -------------------------------------------------------------------------
    def extra_tables(self, ctx: Context, config: Any, base: Path | None, home: Path | None) -> list[HookTable]:
        """Hook tables the dialect loads beyond its hooks file (the config's other keys for it)."""
        return []


_KNOWN: dict[Dialect, tuple[HookDialect, int]] = {}
"""The dialects loaded in this process, each with how many fibers hold it."""

DIALECT_GROUP = "dsh.hook_dialects"
"""The entry-point group of dialects (a contract): each names a :class:`HookDialect` instance, or a
zero-argument callable returning one."""


def register_dialect(dialect: HookDialect) -> Callable[[], None]:
    """Make ``dialect`` known (its hooks can load and run) until the returned disposer is called.

    A second dialect object of a name already known is refused, naming both peers.
    """
    if not isinstance(dialect, HookDialect) or not dialect.name:
        raise TypeError(f"a hook dialect must be a named dsh.hooks.dialect.HookDialect, not {dialect!r}")
    held = _KNOWN.get(dialect.name)
    if held is not None and held[0] is not dialect:
        raise ValueError(
            f"two hook dialects are named {dialect.name!r} ({held[0].peer} and {dialect.peer}); uninstall one"
        )
    _KNOWN[dialect.name] = (dialect, (held[1] if held else 0) + 1)
    done = False

    def dispose() -> None:
        nonlocal done
        if done:
            return
        done = True
        current = _KNOWN.get(dialect.name)
        if current is None:
            return
        if current[1] <= 1:
            del _KNOWN[dialect.name]
        else:
            _KNOWN[dialect.name] = (dialect, current[1] - 1)

    return dispose


def load_dialect(dialect: HookDialect) -> Callable[[], None]:
    """What the hooks plugin does for each dialect while its fiber lives: register it
    (:func:`register_dialect`) and keep its peer's identity variables from every child
    (:func:`dsh.bash.declare_harness_identity`); undone by the returned disposer."""
    from dsh.bash import declare_harness_identity

    release = register_dialect(dialect)
    undeclare = declare_harness_identity(dialect.identity_variables)

    def dispose() -> None:
        undeclare()
        release()

    return dispose


@contextmanager
def loaded(*given: HookDialect) -> Iterator[None]:
    """``given`` loaded (:func:`load_dialect`) inside the block: for a test or a host that drives the
    stages without a deployment."""
    held = [load_dialect(dialect) for dialect in given]
    try:
        yield
    finally:
        for dispose in reversed(held):
            dispose()


def dialects() -> tuple[HookDialect, ...]:
    """Every dialect loaded, in the order their hooks run and are reported (by name)."""
    return tuple(_KNOWN[name][0] for name in sorted(_KNOWN))


def dialect_names() -> tuple[Dialect, ...]:
    """Every loaded dialect's name (its key in the hooks config)."""
    return tuple(sorted(_KNOWN))


def dialect_of(name: Dialect) -> HookDialect:
    """The dialect called ``name``; a name no loaded dialect has is a ``ValueError`` listing the known ones."""
    found = _KNOWN.get(name)
    if found is None:
        raise ValueError(f"no hook dialect named {name!r} is loaded; dialects: {', '.join(sorted(_KNOWN)) or 'none'}")
    return found[0]


def all_placeholders() -> tuple[str, ...]:
    """Every dialect's ``${NAME}`` placeholders, each once."""
    return tuple(dict.fromkeys(p for d in dialects() for p in d.placeholders))
