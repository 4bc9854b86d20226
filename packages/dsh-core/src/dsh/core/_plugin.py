"""The plugin contract: ``name``, optional ``inject`` and ``Config``, and ``apply(ctx, config)``."""

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ._errors import FieldError, PluginError
from ._services import ServiceKey, key_name

if TYPE_CHECKING:
    from ._context import Context

ApplyFn = Callable[["Context", Any], None]

ConfigValidator = Callable[[str, type[Any], object], Any]
"""Validates a plugin's raw config: ``(plugin name, Config, raw) -> config``, raising
:class:`PluginError` naming the field. The kernel names no validation library; a root gets one
(``Context.root(validate=...)``: dsh-loader's pydantic one, ``dsh.loader.validate_config``)."""


class Plugin(NamedTuple):
    """A plugin defined in code; a module with the same attributes is a plugin too.

    ``apply`` receives the fiber's context and the validated ``Config`` instance, or
    ``None`` when the plugin declares no ``Config``. An immutable ``NamedTuple``, as every record of
    dsh's is (the record rule, root README).
    """

    name: str
    apply: ApplyFn
    Config: type[Any] | None = None
    """A ``typing.NamedTuple`` (dsh's own kind), a stdlib dataclass or a pydantic model (see :func:`plugin_config`)."""
    inject: tuple[str | ServiceKey[Any], ...] = ()


def plugin_name(plugin: object) -> str:
    """Return the plugin's name, or raise :class:`PluginError` when it has none."""
    name = getattr(plugin, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise PluginError(f"plugin {plugin!r} has no non-blank string 'name'")
    return name


def plugin_inject(plugin: object) -> tuple[str, ...]:
    """Return the service names the plugin requires before it may start."""
    raw: Sequence[str | ServiceKey[Any]] = getattr(plugin, "inject", ()) or ()
    if isinstance(raw, str):
        raise PluginError(f"plugin '{plugin_name(plugin)}' declares inject as a string; use a list of names")
    return tuple(key_name(k) for k in raw)


def plugin_apply(plugin: object) -> ApplyFn:
    """Return the plugin's ``apply`` callable, or raise :class:`PluginError`."""
    apply = getattr(plugin, "apply", None)
    if not callable(apply):
        raise PluginError(f"plugin '{plugin_name(plugin)}' has no callable 'apply'")
    return apply  # type: ignore[no-any-return]


def plugin_config(plugin: object, raw: object, validate: ConfigValidator | None = None) -> Any:
    """Validate ``raw`` against the plugin's ``Config``; raise :class:`PluginError` naming the field.

    An instance of ``Config`` is used as it is; an absent or empty config of a NamedTuple or a
    dataclass without required fields is ``Config()``, with no validator at all. Anything else goes
    to ``validate`` (dsh-loader's imports pydantic only then); without one it is refused, naming the plugin.
    """
    config_cls = getattr(plugin, "Config", None)
    name = plugin_name(plugin)
    if config_cls is None:
        if raw not in (None, {}):
            raise PluginError(f"plugin '{name}' takes no config, but got {raw!r}", plugin=name)
        return None
    # The schema protocol, naming no library: a NamedTuple, a dataclass, or a class that validates
    # itself (``model_validate``, as a pydantic model does).
    required = _required_fields(config_cls)
    if required is None and not (isinstance(config_cls, type) and hasattr(config_cls, "model_validate")):
        message = f"plugin '{name}' has a Config that is not a NamedTuple, a dataclass or a pydantic model"
        raise PluginError(message, plugin=name)
    if isinstance(raw, config_cls):
        return raw
    raw = raw or {}
    if raw == {} and required == ():
        try:
            return config_cls()
        except FieldError as exc:  # a default out of its own range: the plugin's defect, named
            message = f"plugin '{name}' has invalid config: field 'config.{exc.field}' {exc.reason}"
            raise PluginError(message, plugin=name) from None
    if validate is None:
        message = (
            f"plugin '{name}' has a config to validate, but its kernel has no config validator; "
            "make the root with dsh.loader.root() or Context.root(validate=...)"
        )
        raise PluginError(message, plugin=name)
    return validate(name, config_cls, raw)


def _is_named_tuple(cls: object) -> bool:
    """Whether ``cls`` is a ``typing.NamedTuple`` class (or a subclass of one, as a checked record is)."""
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def _required_fields(cls: object) -> tuple[str, ...] | None:
    """The fields a NamedTuple or dataclass ``cls`` has no default for; None for any other class."""
    if _is_named_tuple(cls):
        defaults: dict[str, Any] = getattr(cls, "_field_defaults", {})
        return tuple(f for f in getattr(cls, "_fields") if f not in defaults)  # noqa: B009 (Any, not tuple's)
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        missing = dataclasses.MISSING
        return tuple(
            f.name for f in dataclasses.fields(cls) if f.init and f.default is missing and f.default_factory is missing
        )
    return None
