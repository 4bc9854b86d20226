"""A loaded hook table: command hooks grouped by event and matcher, and how a matcher matches.

Every dialect loads into the same types (:mod:`._load` reads the peers' files); the runner asks a
table which groups an event has and each group whether it applies to the event's subject, by the
rule of the table's dialect (:attr:`._dialect.HookDialect.exact_name_matchers`). The tables loaded
dialects hold are kept in one :class:`HookTables`.
"""

import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from dsh.session import EMPTY_MAPPING

from ._dialect import Dialect as Dialect  # re-exported: the name tables and tests use
from ._dialect import HookDialect, dialect_of, dialects

DEFAULT_TIMEOUT = 600.0
"""The field's default for a :class:`HookCommand` built by hand; the loader gives each hook its
dialect's own (:attr:`~._dialect.HookDialect.default_timeout`)."""

_EXACT_MATCHER = re.compile(r"[A-Za-z0-9_|]+")


class HookCommand(NamedTuple):
    """One command hook, normalised from either dialect."""

    command: str
    args: tuple[str, ...] | None = None
    """Exec form: ``command`` is resolved on PATH and run with these arguments, no shell."""
    timeout: float = DEFAULT_TIMEOUT
    shell: Literal["bash", "powershell"] = "bash"
    condition: str | None = None
    """A permission rule the hook runs under (``if: "Bash(git *)"``), checked by its dialect."""
    run_async: bool = False
    """``async``: runs in the background; it never blocks or decides."""
    once: bool = False
    """Runs once per session, then is skipped."""
    source: str = ""
    """Where the hook was configured (file path, or ``<dialect> hooks (inline)``)."""
    plugin_root: str | None = None
    """The plugin folder the hook came from, if any (its dialect tells the hook where)."""
    plugin_data: str | None = None
    """That plugin's private, persistent data folder."""

    @property
    def label(self) -> str:
        """How reports and warnings name the hook."""
        return self.command if self.args is None else " ".join([self.command, *self.args])

    @property
    def identity(self) -> tuple[Any, ...]:
        """What makes two command hooks the same hook (a dialect that runs duplicates once)."""
        return (self.command, self.args, self.shell, self.plugin_root)


class MatcherGroup(NamedTuple):
    """Hooks that run when ``matcher`` matches the event's subject."""

    matcher: str | None
    hooks: tuple[HookCommand, ...]
    dialect: Dialect

    def matches(self, subjects: Sequence[str] | str | None, event: str = "") -> bool:
        """Whether this group applies to ``event`` whose subject is one of ``subjects``."""
        return matcher_matches(self.dialect, self.matcher, subjects, event)


class HookTable(NamedTuple):
    """Event name -> matcher groups of one dialect, as under the ``hooks`` key of the peer's file."""

    dialect: Dialect
    events: Mapping[str, tuple[MatcherGroup, ...]] = EMPTY_MAPPING
    source: str = ""
    disabled: bool = False
    """``disableAllHooks: true``: the file's hooks load but never run."""
    warnings: tuple[str, ...] = ()
    """What was skipped or ignored while loading, one line each."""
    files: tuple[str, ...] = ()
    """The files this table was read from, those whose appearance would change it (a plugin folder's
    ``hooks/hooks.json`` and manifest) and the folders it trusted (a plugin's ``skills`` and data
    folders): what a long-lived process watches (dsh-cli)."""

    def groups(self, event: str) -> tuple[MatcherGroup, ...]:
        """The groups configured for ``event`` (none when the table is disabled)."""
        return () if self.disabled else self.events.get(event, ())

    def holds_hooks(self) -> bool:
        """Whether an event of this table has a hook that may run (the table is not disabled)."""
        return not self.disabled and any(group.hooks for groups in self.events.values() for group in groups)


class HookTables(Mapping[Dialect, HookTable]):
    """Each loaded dialect's table (a mapping by dialect name) and the configuration's warnings: the
    one record of which hooks are configured, which the ``hooks`` service (:class:`._hooks.Hooks`)
    and the runner it builds (:class:`._service.HookRunner`) both read.

    A dialect's table is held from :meth:`add` until its disposer is called (its fiber unloads); a
    holder of per-dialect state (the runner's transcript views) drops it through :meth:`on_remove`.
    """

    def __init__(self) -> None:
        self._tables: dict[Dialect, HookTable] = {}
        self._warnings: list[str] = []
        self._removed: list[Callable[[Dialect], object]] = []

    def __getitem__(self, dialect: Dialect) -> HookTable:
        return self._tables[dialect]

    def __iter__(self) -> Iterator[Dialect]:
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def add(self, dialect: Dialect, table: HookTable) -> Callable[[], None]:
        """Hold ``table`` as ``dialect``'s until the returned disposer is called (its fiber unloads)."""
        self._tables[dialect] = table

        def remove() -> None:
            if self._tables.get(dialect) is table:
                del self._tables[dialect]
                for removed in self._removed:
                    removed(dialect)

        return remove

    def on_remove(self, removed: Callable[[Dialect], object]) -> None:
        """Call ``removed`` with a dialect's name each time its table is removed."""
        self._removed.append(removed)

    def dialects(self) -> list[HookDialect]:
        """The dialects that have a table here, in the order their hooks run (:func:`._dialect.dialects`)."""
        return [d for d in dialects() if d.name in self._tables]

    def add_warnings(self, lines: Iterable[str]) -> None:
        """Add lines to :attr:`warnings` (configuration problems outside any one table)."""
        self._warnings.extend(lines)

    @property
    def warnings(self) -> list[str]:
        """Everything skipped or ignored while loading the hook files, one line each."""
        return [*self._warnings, *(w for table in self._tables.values() for w in table.warnings)]

    def files(self) -> list[str]:
        """Every file the hooks were read from (or would be, once it appears), each once."""
        return list(dict.fromkeys(f for table in self._tables.values() for f in table.files))

    def has_hooks(self, events: Iterable[str]) -> bool:
        """Whether an enabled table configures a hook for one of ``events``.

        ``events`` are dsh's hook points (``PreToolUse``, ``Stop``, ...), each dialect asked for its
        own name of each. Cheap (no matching, no process): a host asks it before choosing to run
        without asyncio, since an event without hooks returns at once, without suspending.
        """
        wanted = set(events)
        for name, table in self._tables.items():
            peer = dialect_of(name)
            for event in wanted:
                own = peer.peer_event(event)
                if own is not None and any(group.hooks for group in table.groups(own)):
                    return True
        return False


def exact_names(matcher: str) -> bool:
    """Whether ``matcher`` is made only of letters, digits, ``_`` and ``|`` (a list of names)."""
    return _EXACT_MATCHER.fullmatch(matcher) is not None


def _exact(dialect: Dialect, matcher: str) -> bool:
    """Whether ``matcher`` is a list of exact names under ``dialect``'s rule."""
    return dialect_of(dialect).exact_name_matchers and exact_names(matcher)


def matcher_matches(
    dialect: Dialect, matcher: str | None, subjects: Sequence[str] | str | None, event: str = ""
) -> bool:
    """Match as the peer does (:meth:`~._dialect.HookDialect.matches`).

    ``None``, ``""`` and ``"*"`` match everything, as does an event without a subject.
    """
    if not matcher or matcher == "*" or subjects is None:
        return True
    values = [subjects] if isinstance(subjects, str) else list(subjects)
    return dialect_of(dialect).matches(matcher, values, event)


def matcher_typo(dialect: Dialect, matcher: str, names: Collection[str], event: str) -> str | None:
    """A did-you-mean for a tool matcher of ``event`` that misspells tool ``names`` (``bash``, ``BASH``, ``Bash ``,
    ``Bash,Write``, ``bash|Write``); None when it matches them as written, or resembles none of them
    (a third party's tool, say)."""
    if not matcher or matcher == "*" or "mcp__" in matcher or invalid_matcher(dialect, matcher) is not None:
        return None
    wrong = False  # a list of exact names is wrong only where one of its names is
    if _exact(dialect, matcher):
        words = matcher.split("|")
    elif matcher_matches(dialect, matcher, list(names), event):
        return None
    else:
        words, wrong = re.split(r"[\s,;|/]+", matcher.strip()), True
    folded = {name.casefold(): name for name in names}
    guesses: list[str] = []
    for word in words:
        guess = word if word in names else folded.get(word.casefold())
        guess = guess or _close_match(word, names)
        wrong = wrong or (guess is not None and guess != word)
        if guess is not None and guess not in guesses:
            guesses.append(guess)
    return "|".join(guesses) if wrong and guesses else None


def invalid_matcher(dialect: Dialect, matcher: str) -> str | None:
    """Why ``matcher`` can never match (the regular expression's error), or None when it is valid."""
    if not matcher or matcher == "*":
        return None
    return dialect_of(dialect).invalid_matcher(matcher)


def merge_tables(dialect: Dialect, tables: Sequence[HookTable], source: str) -> HookTable:
    """One table of every table's groups, in order; disabled when the first (the user's own) is."""
    events: dict[str, tuple[MatcherGroup, ...]] = {}
    for table in tables:
        if table.disabled:
            continue
        for event, groups in table.events.items():
            events[event] = events.get(event, ()) + groups
    disabled = bool(tables) and tables[0].disabled
    warnings = tuple(w for t in tables for w in t.warnings)
    files = tuple(dict.fromkeys(f for t in tables for f in t.files))
    return HookTable(dialect, events, source, disabled, warnings, files)


def _close_match(word: str, names: Collection[str]) -> str | None:
    """The name ``word`` most likely misspells, if one is close enough: only for a word that names nothing."""
    import difflib  # a misspelt matcher or event is rare: a loaded table never needs it otherwise

    return next(iter(difflib.get_close_matches(word, names, n=1, cutoff=0.75)), None)
