"""Validation with pydantic, and its errors in plain words naming each field.

This module imports pydantic; the loader imports it only when something must be validated (a
non-empty config of a NamedTuple or dataclass ``Config``, a deployment file, a script), so that a command whose
configs are all empty never pays for pydantic. The kernel names no validation library: a root made
by :func:`dsh.loader.root` validates plugin configs with :func:`validate_config` (the kernel's
``validate`` seam).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from dsh.core import FieldError, PluginError

__all__ = [
    "field_path",
    "format_validation_error",
    "plain_error",
    "problems",
    "validate_config",
    "validate_dataclass",
    "validate_model",
    "validate_named_tuple",
]

_PLAIN = {
    "missing": "is required",
    "extra_forbidden": "is not a known field (check its spelling)",
    "unexpected_keyword_argument": "is not a known field (check its spelling)",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "sequence_str": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dataclass_type": "must be a mapping",
    "named_tuple_type": "must be a mapping",
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
    if kind in ("literal_error", "enum") and "expected" in ctx:
        return f"must be one of {ctx['expected']}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal") and ctx:
        bound = next(iter(ctx.values()))
        words = {"greater_than": "greater than", "greater_than_equal": "at least", "less_than": "less than"}
        return f"must be {words.get(kind, 'at most')} {bound}"
    if kind == "is_instance_of" and ctx.get("class") == "Sequence":  # a ``Sequence`` field given a non-list
        return "must be a list"
    if kind == "value_error":
        error = ctx.get("error")
        if isinstance(error, FieldError):
            return error.reason
        return str(err.get("msg", "")).removeprefix("Value error, ")
    return _PLAIN.get(kind, str(err.get("msg", "is invalid")))


def field_path(loc: Sequence[int | str]) -> str:
    """``turns[0].steps`` for pydantic's ``('turns', 0, 'steps')``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _bare(hint: Any) -> Any:
    """``hint`` without ``Annotated`` metadata and without a ``None`` member (pydantic's nullable, no tag)."""
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        if len(members) == 1:
            return _bare(members[0])
    return hint


def _is_union(hint: Any) -> bool:
    """Whether pydantic validates ``hint`` as a union of several members (each named in an error's location)."""
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _fields(hint: Any) -> Mapping[str, Any] | None:
    """The annotations of a record's fields (a NamedTuple, a dataclass, a pydantic model); None for other types."""
    if not isinstance(hint, type):
        return None
    if issubclass(hint, BaseModel):
        return {name: field.annotation for name, field in hint.model_fields.items()}
    if _is_named_tuple(hint) or dataclasses.is_dataclass(hint):
        try:
            return typing.get_type_hints(hint, include_extras=True)
        except Exception:  # an annotation that does not resolve: merge nothing below it
            return None
    return None


def _union_at(schema: Any, path: Sequence[int | str]) -> bool:
    """Whether the value at ``path`` under ``schema`` is a union (so the next location part names a member).

    Only what the annotations say: a mapping's key named like a type is a key. A path that goes
    through a union member is not followed (False).
    """
    hint = _bare(schema)
    for part in path:
        if _is_union(hint):
            return False
        fields = _fields(hint)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if fields is not None:
            if not isinstance(part, str) or part not in fields:
                return False
            hint = fields[part]
        elif isinstance(origin, type) and issubclass(origin, Mapping):
            hint = args[1] if len(args) == 2 else Any
        elif origin is tuple and args and args[-1] is not Ellipsis:
            hint = args[part] if isinstance(part, int) and part < len(args) else Any
        elif isinstance(origin, type) and issubclass(origin, Sequence | frozenset | set):
            hint = args[0] if args else Any
        else:
            return False
        hint = _bare(hint)
    return _is_union(hint)


def _merge_unions(
    found: list[tuple[tuple[int | str, ...], str]], schema: Any
) -> list[tuple[tuple[int | str, ...], str]]:
    """One problem per union field instead of one per member, in the user's words, with no member names.

    Which location parts name a union's members (``dict[str,any]``, ``str``, a record's class name)
    is read from ``schema``'s annotations. A value no member took is reported at the field as what
    it must be (``must be a mapping or a string``); where a member got further into the value (a
    list whose second item is not a string), that member's deeper problems say what to fix.
    """
    out: list[tuple[tuple[int | str, ...], str]] = []
    i = 0
    while i < len(found):
        loc, message = found[i]
        at = next((k for k in range(len(loc)) if _union_at(schema, loc[:k])), None)
        if at is None:
            out.append((loc, message))
            i += 1
            continue
        prefix, j = loc[:at], i
        while j < len(found) and len(found[j][0]) > at and found[j][0][:at] == prefix:
            j += 1
        members = found[i:j]
        deeper = [(m_loc[:at] + m_loc[at + 1 :], m_msg) for m_loc, m_msg in members if len(m_loc) > at + 1]
        if deeper:
            out.extend(deeper)
        else:
            wants = [m_msg.removeprefix("must be ") for _, m_msg in members]
            said = all(m_msg.startswith("must be ") for _, m_msg in members)
            out.append((prefix, "must be " + " or ".join(dict.fromkeys(wants)) if said else "; or ".join(wants)))
        i = j
    return out


def problems(exc: ValidationError, schema: Any = None) -> list[tuple[tuple[int | str, ...], str]]:
    """Each failing field's location and what is wrong with it, in plain words.

    A :class:`~dsh.core.FieldError` raised by a checked NamedTuple's ``__new__`` (or a dataclass's
    ``__post_init__``) is placed at its field (pydantic places it at the record itself). Given the
    ``schema`` validated against (a record class), a field of several types (``dict[str, Any] | str``)
    gets one problem, not one per type named by pydantic.
    """
    out = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        error = (err.get("ctx") or {}).get("error")
        if err.get("type") == "value_error" and isinstance(error, FieldError):
            loc = (*loc, error.field)
        out.append((loc, plain_error(err)))
    return out if schema is None else _merge_unions(out, schema)


def format_validation_error(exc: ValidationError, prefix: str = "", schema: Any = None) -> str:
    """Render a pydantic error as one plain sentence per failing field, naming each field (see :func:`problems`)."""
    parts = []
    for loc, message in problems(exc, schema):
        path = field_path((*((prefix,) if prefix else ()), *loc))
        if not path and message == _PLAIN["dict_type"]:  # every mapping kind reads so
            parts.append("the top level must be a mapping of fields")
        else:
            parts.append(f"field '{path or '<root>'}' {message}")
    return "; ".join(parts)


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _unknown_fields(cls: type[Any], raw: object) -> list[Any]:
    if not isinstance(raw, Mapping) or "extra" in getattr(cls, "__pydantic_config__", {}):
        return []
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    return [{"type": "extra_forbidden", "loc": (str(k),), "input": v} for k, v in raw.items() if k not in known]


def validate_dataclass(cls: type[Any], raw: object) -> Any:
    """Validate ``raw`` into the dataclass ``cls``; unknown top-level fields are errors too.

    pydantic ignores unknown fields of a plain dataclass unless the class says otherwise
    (``__pydantic_config__ = {"extra": "forbid"}``, how nested dataclasses forbid them), so unless
    it says, the top level is checked here: a misspelt field is never silently dropped. Raises
    ``ValidationError``.
    """
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return _refusing_unknown(
        cls, [*_unknown_fields(cls, raw), *_shape_problems(cls, raw)], lambda: adapter.validate_python(raw)
    )


def _refusing_unknown(cls: type[Any], unknown: list[Any], validate: Callable[[], Any]) -> Any:
    """``validate()``, raising one ``ValidationError`` with its own errors and the ``unknown`` fields'.

    Below a value reported as not a mapping, pydantic's own errors (from reading it by position) are left out;
    a field pydantic reports itself (a strict model's boolean number) is reported once.
    """
    try:
        value = validate()
    except ValidationError as exc:
        seen = {tuple(e["loc"]) for e in exc.errors()}
        unknown = [u for u in unknown if u["type"] == "extra_forbidden" or tuple(u["loc"]) not in seen]
        if not unknown:
            raise
        lists = [tuple(u["loc"]) for u in unknown if u["type"] == "dict_type"]
        found: list[Any] = [
            {"type": e["type"], "loc": e["loc"], "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e else {})}
            for e in exc.errors()
            if not any(len(e["loc"]) > len(at) and tuple(e["loc"][: len(at)]) == at for at in lists)
        ]
        raise ValidationError.from_exception_data(exc.title, [*found, *unknown]) from None
    if unknown:
        raise ValidationError.from_exception_data(cls.__name__, unknown)
    return value


def _unknown_model_fields(cls: type[BaseModel], raw: object) -> list[Any]:
    if not isinstance(raw, Mapping) or "extra" in cls.model_config:
        return []
    known = set()
    for field_name, info in cls.model_fields.items():
        known.add(field_name)
        for alias in (info.alias, info.validation_alias):
            if isinstance(alias, str):
                known.add(alias)
    return [{"type": "extra_forbidden", "loc": (str(k),), "input": v} for k, v in raw.items() if k not in known]


def validate_model(cls: type[BaseModel], raw: object) -> Any:
    """Validate ``raw`` into the pydantic model ``cls``; unknown top-level fields are errors too.

    pydantic ignores unknown fields of a model unless its ``model_config`` sets ``extra``; a plugin
    config that says nothing must not drop a misspelt field either (``{ticket: T-1, prio: 2}`` for a
    model of ``ticket`` alone names ``prio``). A model that sets ``extra`` keeps its own choice.
    Raises ``ValidationError``.
    """
    return _refusing_unknown(
        cls, [*_unknown_model_fields(cls, raw), *_shape_problems(cls, raw)], lambda: cls.model_validate(raw)
    )


def _is_named_tuple(cls: object) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def _is_record(cls: object) -> bool:
    """A NamedTuple, a dataclass or a pydantic model: a type whose fields a config names."""
    if not isinstance(cls, type):
        return False
    return _is_named_tuple(cls) or dataclasses.is_dataclass(cls) or issubclass(cls, BaseModel)


def _record_hints(cls: type[Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # a hint that does not resolve: pydantic reports it; nothing to walk here
        return {}


def _items_of(hint: Any) -> Any:
    """The item type of a sequence type (``tuple[P, ...]``, ``list[P]``, ``Sequence[P]``); else None."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    if origin in (list, Sequence) and len(args) == 1:
        return args[0]
    return None


def _number_error(hint: Any) -> dict[str, Any] | None:
    """The error (type and context) of a field of type ``hint`` that takes numbers and no boolean
    (``int``, ``float | None``, an ``IntEnum``, ``Literal[1, 2]``, ...), else None (``bool``, ``Any``,
    a union with either, a ``Literal`` with ``True`` in it, anything else)."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    if any(option in (bool, Any, object) for option in options):
        return None
    literals = [v for o in options if typing.get_origin(o) is typing.Literal for v in typing.get_args(o)]
    if any(isinstance(v, bool) for v in literals):
        return None
    if int in options:
        return {"type": "int_type"}
    if float in options:
        return {"type": "float_type"}
    # pydantic takes true for the member 1 of an IntEnum and for 1 of a Literal, as it does for an int.
    enum = next((o for o in options if isinstance(o, type) and issubclass(o, int) and issubclass(o, Enum)), None)
    if enum is not None:
        return {"type": "enum", "ctx": {"expected": _one_of([m.value for m in enum])}}
    if any(isinstance(v, int) for v in literals):
        return {"type": "literal_error", "ctx": {"expected": _one_of(literals)}}
    return None


def _one_of(values: Sequence[object]) -> str:
    """``1, 2 or 3``, as pydantic words the values a field takes."""
    words = [repr(v) for v in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _shape_problems(cls: type[Any], raw: object, loc: tuple[int | str, ...] = (), depth: int = 0) -> list[Any]:
    """What pydantic's lax mode would take from a file and turn into something else, at any depth.

    - A list where a NamedTuple is expected: pydantic builds the record positionally, so
      ``persistence: [sqlite]`` would silently become ``backend='sqlite'``. A record in a file is
      always a mapping of its fields.
    - A boolean where a number is expected: pydantic reads ``true`` as 1, so ``port: yes`` would
      become port 1, ``max_output: true`` one character, and ``level: on`` the member 1 of an
      ``IntEnum`` or the 1 of a ``Literal[1, 2]``. (A field that also takes booleans is left to
      pydantic.)

    Records (NamedTuples, dataclasses, pydantic models) are followed through their fields (a model's
    by field name; an alias is left to pydantic), sequences and mapping values. Below a union of
    several types nothing is reported here: pydantic names the member in each location there.
    """
    if not isinstance(raw, Mapping) or depth > 32:
        return []
    found: list[Any] = []
    hints = _record_hints(cls)
    for name, value in raw.items():
        hint = hints.get(name) if isinstance(name, str) else None
        if hint is not None:
            found += _value_problems(hint, value, (*loc, name), depth)
    return found


def _value_problems(hint: Any, value: object, loc: tuple[Any, ...], depth: int) -> list[Any]:
    """:func:`_shape_problems` for one value of type ``hint`` at ``loc``."""
    number = _number_error(hint)
    if number is not None and isinstance(value, bool):
        return [{**number, "loc": loc, "input": value}]
    bare = _bare(hint)
    if _is_union(bare) or depth > 32:
        return []
    if _is_named_tuple(bare) and isinstance(value, (list, tuple)):
        return [{"type": "dict_type", "loc": loc, "input": value}]
    if _is_record(bare):
        return _shape_problems(bare, value, loc, depth + 1)
    origin, args = typing.get_origin(bare), typing.get_args(bare)
    items = _items_of(bare)
    if items is not None and isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in _value_problems(items, item, (*loc, i), depth + 1)]
    if isinstance(origin, type) and issubclass(origin, Mapping) and len(args) == 2 and isinstance(value, Mapping):
        return [p for k, v in value.items() for p in _value_problems(args[1], v, (*loc, k), depth + 1)]
    return []


def validate_named_tuple(cls: type[Any], raw: object) -> Any:
    """Validate the mapping ``raw`` into the NamedTuple ``cls``; unknown fields are errors (pydantic's own).

    The top level, and every record nested in it, must be a mapping of fields (pydantic would
    also take a list of values in field order), and a number field refuses a boolean (pydantic
    would read ``true`` as 1). A checked record's ``__new__`` runs, and a
    :class:`~dsh.core.FieldError` it raises is reported at its field (see :func:`problems`).
    Raises ``ValidationError``.
    """
    if not isinstance(raw, Mapping):
        raise ValidationError.from_exception_data(cls.__name__, [{"type": "dict_type", "loc": (), "input": raw}])
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return _refusing_unknown(cls, _shape_problems(cls, raw), lambda: adapter.validate_python(raw))


def validate_config(name: str, config_cls: type[Any], raw: object) -> Any:
    """Validate a plugin's raw config against its ``Config`` (a NamedTuple, a dataclass or a pydantic model).

    Unknown fields are refused either way. Raise :class:`~dsh.core.PluginError` naming each failing
    field (``config.port``).
    """
    try:
        if _is_named_tuple(config_cls):
            return validate_named_tuple(config_cls, raw)
        if issubclass(config_cls, BaseModel):
            return validate_model(config_cls, raw)
        return validate_dataclass(config_cls, raw)
    except ValidationError as exc:
        detail = format_validation_error(exc, "config", config_cls)
    raise PluginError(f"plugin '{name}' has invalid config: {detail}", plugin=name) from None
