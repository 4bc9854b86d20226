"""The plugin contract: ``name``, optional ``inject`` and ``Config``, and ``apply(ctx, config)``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ._errors import PluginError
from ._services import ServiceKey, key_name

if TYPE_CHECKING:
    from ._context import Context

ApplyFn = Callable[["Context", Any], None]


@dataclass(frozen=True)
class Plugin:
    """A plugin defined in code; a module with the same attributes is a plugin too.

    ``apply`` receives the fiber's context and the validated ``Config`` instance, or
    ``None`` when the plugin declares no ``Config``.
    """

    name: str
    apply: ApplyFn
    Config: type[BaseModel] | None = None
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


_PLAIN = {
    "missing": "is required",
    "extra_forbidden": "is not a known field (check its spelling)",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "string_type": "must be a string",
    "string_too_short": "must not be empty",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "greater_than": "is too small",
    "greater_than_equal": "is too small",
    "less_than": "is too large",
    "less_than_equal": "is too large",
}


def plain_error(err: Mapping[str, Any]) -> str:
    """One pydantic error detail in plain words (``must be a list``), without pydantic's wording."""
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    if kind == "literal_error" and "expected" in ctx:
        return f"must be one of {ctx['expected']}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal") and ctx:
        bound = next(iter(ctx.values()))
        words = {"greater_than": "greater than", "greater_than_equal": "at least", "less_than": "less than"}
        return f"must be {words.get(kind, 'at most')} {bound}"
    if kind == "value_error":
        return str(err.get("msg", "")).removeprefix("Value error, ")
    return _PLAIN.get(kind, str(err.get("msg", "is invalid")))


def field_path(loc: Sequence[int | str]) -> str:
    """``turns[0].steps`` for pydantic's ``('turns', 0, 'steps')``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """Render a pydantic error as one plain sentence per failing field, naming each field."""
    parts = []
    for err in exc.errors():
        loc = field_path((*((prefix,) if prefix else ()), *err["loc"]))
        if not loc and err.get("type") in ("model_type", "dict_type", "model_attributes_type"):
            parts.append("the top level must be a mapping of fields")
        else:
            parts.append(f"field '{loc or '<root>'}' {plain_error(err)}")
    return "; ".join(parts)


def validate_config(plugin: object, raw: object) -> Any:
    """Validate ``raw`` against the plugin's ``Config``; raise :class:`PluginError` naming the field."""
    config_cls = getattr(plugin, "Config", None)
    if config_cls is None:
        if raw not in (None, {}):
            raise PluginError(f"plugin '{plugin_name(plugin)}' takes no config, but got {raw!r}")
        return None
    if not (isinstance(config_cls, type) and issubclass(config_cls, BaseModel)):
        raise PluginError(f"plugin '{plugin_name(plugin)}' has a Config that is not a pydantic model")
    try:
        return config_cls.model_validate(raw or {})
    except ValidationError as exc:
        raise PluginError(
            f"plugin '{plugin_name(plugin)}' has invalid config: {format_validation_error(exc, 'config')}"
        ) from None
