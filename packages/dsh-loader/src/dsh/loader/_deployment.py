"""Deployments: which backend, model and plugins to load, validated from files, and the one harness home.

The records are checked ``NamedTuple`` classes (dsh's record rule, see the README): a deployment
built in code (the default one) needs neither pydantic nor :mod:`dataclasses`; a file or a mapping
is validated by pydantic, imported by :func:`parse_deployment`, which calls each record's checking
``__new__`` as a caller in code does. ``_replace`` skips those checks; :meth:`Deployment.replace` runs them.
"""

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from dsh.core import FieldError
from dsh.paths import UntrustedPathError, open_trusted, resolve_dsh_home
from dsh.session import EMPTY_MAPPING

from ._errors import DeploymentError

MAX_DEPLOYMENT_BYTES = 1024 * 1024
"""Largest deployment file read (1 MiB): a real one is a few hundred bytes, and a huge one would
hold every command up while YAML parses it."""


class _PluginEntry(NamedTuple):
    id: str
    name: str = ""
    config: Mapping[str, Any] = EMPTY_MAPPING
    enabled: bool = True


class PluginEntry(_PluginEntry):
    """One plugin of a deployment: ``name`` is a ``dsh.plugins`` entry point or ``module:attr``.

    ``name`` defaults to ``id``. ``enabled: false`` removes the entry (how a deployment file
    removes one of the default plugins it is layered on). ``config`` is the entry's raw config, as
    its file wrote it: the plugin's ``Config`` validates it.
    """

    __slots__ = ()

    def __new__(
        cls, id: str, name: str = "", config: Mapping[str, Any] = EMPTY_MAPPING, enabled: bool = True
    ) -> "PluginEntry":
        if not id:
            raise FieldError("id", "must not be empty")
        return super().__new__(cls, id, name if name.strip() else id, config, enabled)


class _PersistenceChoice(NamedTuple):
    backend: str = "jsonl"
    config: Mapping[str, Any] = EMPTY_MAPPING


class PersistenceChoice(_PersistenceChoice):
    """The session persistence backend: a name in the ``dsh.persistence`` group and its config."""

    __slots__ = ()

    def __new__(cls, backend: str = "jsonl", config: Mapping[str, Any] = EMPTY_MAPPING) -> "PersistenceChoice":
        if not backend:
            raise FieldError("backend", "must not be empty")
        return super().__new__(cls, backend, config)


class _ModelChoice(NamedTuple):
    provider: str
    config: Mapping[str, Any] = EMPTY_MAPPING


class ModelChoice(_ModelChoice):
    """The model the deployment's agents run on: a name in the ``dsh.models`` group and its config.

    Only a model-driven command loads it (:meth:`~dsh.loader.Runtime.load_model`); ``dsh exec``
    and the other verbs never import a provider.
    """

    __slots__ = ()

    def __new__(cls, provider: str, config: Mapping[str, Any] = EMPTY_MAPPING) -> "ModelChoice":
        if not provider.strip():
            raise FieldError("provider", "must not be empty")
        return super().__new__(cls, provider, config)


_JSONL = PersistenceChoice()
"""The default backend (one immutable instance, shared)."""


class _LoopLimits(NamedTuple):
    max_steps: int = 64
    max_parallel_tools: int = 16


class LoopLimits(_LoopLimits):
    """The agent loop's limits a user can see: model steps per turn, tool calls of one answer at once.

    ``max_steps``: a turn that reaches it without the model finishing fails, with the reason named.
    ``max_parallel_tools``: the tool calls of one model answer run at most this many at once (all
    of them run; results keep the model's order). Both at least 1.
    """

    __slots__ = ()

    def __new__(cls, max_steps: int = 64, max_parallel_tools: int = 16) -> "LoopLimits":
        for name, value in (("max_steps", max_steps), ("max_parallel_tools", max_parallel_tools)):
            if type(value) is not int or value < 1:
                raise FieldError(name, f"must be a whole number of at least 1, not {value!r}")
        return super().__new__(cls, max_steps, max_parallel_tools)


LOOP_DEFAULTS = LoopLimits()
"""The limits of a deployment that names none."""


class _Deployment(NamedTuple):
    dsh_home: str | None = None
    persistence: PersistenceChoice = _JSONL
    plugins: tuple[PluginEntry, ...] | None = None
    model: ModelChoice | None = None
    refresh_per_turn: bool = True
    loop: LoopLimits = LOOP_DEFAULTS


class Deployment(_Deployment):
    """A composed harness: home, persistence backend and plugins (YAML or Python).

    ``plugins`` is ``None`` when the deployment does not say (an application layers its default
    set on it; :func:`~dsh.loader.compose` loads none), and a tuple, possibly empty, when it does
    (any sequence is taken). ``model`` is the model provider, when the deployment names one (``dsh
    run`` also takes ``--model``). ``refresh_per_turn`` re-reads installed distributions before each
    turn (cheap when nothing changed). ``loop`` holds the agent loop's limits (:class:`LoopLimits`).
    """

    __slots__ = ()

    def __new__(
        cls,
        dsh_home: str | None = None,
        persistence: PersistenceChoice = _JSONL,
        plugins: Sequence[PluginEntry] | None = None,
        model: ModelChoice | None = None,
        refresh_per_turn: bool = True,
        loop: LoopLimits = LOOP_DEFAULTS,
    ) -> "Deployment":
        if dsh_home is not None and not dsh_home.strip():
            dsh_home = None
        entries = None if plugins is None else tuple(plugins)
        seen: set[str] = set()
        for entry in entries or ():
            if entry.id in seen:
                raise FieldError("plugins", f"entry id '{entry.id}' appears twice")
            seen.add(entry.id)
        return super().__new__(cls, dsh_home, persistence, entries, model, refresh_per_turn, loop)

    def replace(self, **changes: Any) -> "Deployment":
        """A copy with ``changes``, checked as a new deployment is (``_replace`` would skip the checks)."""
        return Deployment(**{**self._asdict(), **changes})


class ValidationMemo(Protocol):
    """Remembers validated forms between processes: the seam a command's start-up uses to skip yaml and
    pydantic for a deployment file or plugin config it validated before. The loader's default is none:
    it validates every time.

    Each method returns what ``validate`` returns (calling it when the memo cannot answer); an answer
    from the memo must be what ``validate`` would return now, and the memo never raises on its own account.
    """

    def deployment(self, source: str, text: str, validate: Callable[[], Deployment]) -> Deployment:
        """The deployment the file ``source``, holding exactly ``text``, validates to."""
        ...

    def config(self, ref: str, cls: type[Any], raw: Mapping[str, Any], validate: Callable[[], Any]) -> Any:
        """``raw`` validated into the plugin ``ref``'s ``Config`` class ``cls``."""
        ...

    def save(self) -> None:
        """Keep what this process learnt (a composition calls it once, after its configs)."""
        ...


def _describe_loc(raw: object, loc: Sequence[int | str]) -> str:
    from .validation import field_path

    if len(loc) >= 2 and loc[0] == "plugins" and isinstance(loc[1], int):
        entries = raw.get("plugins") if isinstance(raw, Mapping) else None
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else None
        entry_id = entry.get("id") if isinstance(entry, Mapping) else None
        # Only a usable id names the entry: a list or number there is the very field at fault.
        named = isinstance(entry_id, str) and entry_id.strip()
        where = f"entry '{entry_id}' (plugins[{loc[1]}])" if named else f"plugins[{loc[1]}]"
        rest = field_path(loc[2:])
        return f"{where}, field '{rest}'" if rest else where
    return f"field '{field_path(loc) or '<root>'}'"


def parse_deployment(raw: object, source: str = "<deployment>") -> Deployment:
    """Validate a deployment structure with pydantic; errors name ``source``, the entry id and the field."""
    from pydantic import ValidationError

    from .validation import problems, validate_named_tuple

    try:
        deployment: Deployment = validate_named_tuple(Deployment, raw if raw is not None else {})
    except RecursionError:
        raise DeploymentError(f"{source}: a value is nested too deeply to validate", source=source) from None
    except ValidationError as exc:
        found = "; ".join(f"{_describe_loc(raw, loc)} {message}" for loc, message in problems(exc, Deployment))
        raise DeploymentError(f"{source}: {found}", source=source) from None
    return deployment


def load_deployment(path: str | os.PathLike[str], *, validated: ValidationMemo | None = None) -> Deployment:
    """Read a YAML deployment file and validate it with pydantic (or ask ``validated`` for its form).

    A deployment names code to load, so it is read only from a trusted file (see
    :func:`dsh.paths.read_trusted_text`), checked on the one descriptor it is read from.
    """
    source = os.fspath(path)
    try:
        with os.fdopen(open_trusted(source, "deployment file"), "rb") as handle:
            data = handle.read(MAX_DEPLOYMENT_BYTES + 1)  # never more: a growing file is refused too
    except UntrustedPathError as exc:
        raise DeploymentError(str(exc), source=source) from None
    except OSError as exc:
        raise DeploymentError(f"{source}: cannot read deployment file: {exc.strerror or exc}", source=source) from None
    if len(data) > MAX_DEPLOYMENT_BYTES:
        raise DeploymentError(
            f"{source}: a deployment file may hold at most {MAX_DEPLOYMENT_BYTES} bytes (1 MiB), and this one "
            "holds more; is it the right file?",
            source=source,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DeploymentError(f"{source}: a deployment file must be UTF-8 text ({exc})", source=source) from None
    if validated is not None:
        return validated.deployment(os.path.abspath(source), text, lambda: _parse_text(text, source))
    return _parse_text(text, source)


def _parse_text(text: str, source: str) -> Deployment:
    import yaml  # only deployment files need it; the default deployment does not

    try:
        raw = yaml.safe_load(text)
    except RecursionError:
        raise DeploymentError(
            f"{source}: invalid YAML: nested too deeply (a deployment needs a few levels)", source=source
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise DeploymentError(f"{source}: invalid YAML{where}: {getattr(exc, 'problem', exc)}", source=source) from None
    if raw is not None and not isinstance(raw, Mapping):
        raise DeploymentError(f"{source}: a deployment must be a mapping, not {type(raw).__name__}", source=source)
    return parse_deployment(raw, source)


def resolve_home(deployment: Deployment, env: Mapping[str, str] | None = None) -> Path:
    """The one harness home of a deployment: its ``dsh_home``, else ``$DSH_HOME``, else ``~/.dsh``.

    Plugins read it from the ``dsh_home`` service; one that also takes a ``dsh_home`` setting
    checks that it agrees (:func:`dsh.session.plugin_home`).
    """
    return resolve_dsh_home(deployment.dsh_home, env)
