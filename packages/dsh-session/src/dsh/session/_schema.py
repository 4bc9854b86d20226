"""Tool specs as the major function-calling APIs take them: OpenAI function tools (strict mode too), Anthropic tools.

A :class:`~dsh.session.ToolSpec`'s ``parameters`` is a JSON Schema of the call's arguments. OpenAI's
strict mode accepts a narrower dialect: every object closed (``additionalProperties: false``), every
property listed in ``required`` (an optional one is made nullable instead, and the model sends
``null`` for "not given"), no ``default``. :func:`strict_schema` makes that form, :func:`drop_nulls`
turns the model's nulls back into absent arguments, and :func:`strict_problems` says what a schema
lacks for strict mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._errors import SchemaError
from ._tools import ToolSpec

_REFUSED_BY_STRICT = ("default",)
"""Keywords strict mode refuses; :func:`strict_schema` drops them (the tool applies its own default)."""


def _where(path: str) -> str:
    return f"at '{path}'" if path else "at the root"


def strict_problems(schema: Mapping[str, Any]) -> list[str]:
    """What keeps ``schema`` from being a strict-mode schema: one line per fault, empty when it is one."""
    return [f"{_where(path)}: {text}" for path, text in _problems(schema, "")]


def _problems(schema: Mapping[str, Any], path: str) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if kind is None and not any(k in schema for k in ("anyOf", "enum", "const", "$ref")):
        problems.append((path, "no 'type'"))
    for word in _REFUSED_BY_STRICT:
        if word in schema:
            problems.append((path, f"'{word}' is refused by strict mode"))
    if "object" in kinds:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            problems.append((path, "an object needs 'properties' (strict mode has no free-form objects)"))
        else:
            if schema.get("additionalProperties") is not False:
                problems.append((path, "'additionalProperties' must be false"))
            missing = [name for name in properties if name not in (schema.get("required") or ())]
            if missing:
                problems.append((path, f"every property must be required; not required: {', '.join(missing)}"))
            for name, sub in properties.items():
                if isinstance(sub, Mapping):
                    problems.extend(_problems(sub, f"{path}.properties.{name}".lstrip(".")))
    items = schema.get("items")
    if isinstance(items, Mapping):
        problems.extend(_problems(items, f"{path}.items".lstrip(".")))
    for index, option in enumerate(schema.get("anyOf") or ()):
        if isinstance(option, Mapping):
            problems.extend(_problems(option, f"{path}.anyOf[{index}]".lstrip(".")))
    return problems


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
        schema = {**schema, "enum": [*schema["enum"], None]}
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "null":
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if "anyOf" in schema:
        options = list(schema["anyOf"])
        return schema if {"type": "null"} in options else {**schema, "anyOf": [*options, {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in schema.items() if k not in _REFUSED_BY_STRICT}
    properties = out.get("properties")
    if isinstance(properties, Mapping):
        required = set(out.get("required") or ())
        fixed = {}
        for name, sub in properties.items():
            made = _strict(sub) if isinstance(sub, Mapping) else sub
            fixed[name] = made if name in required or not isinstance(made, dict) else _nullable(made)
        out["properties"] = fixed
        out["required"] = list(fixed)
        out["additionalProperties"] = False
    if isinstance(out.get("items"), Mapping):
        out["items"] = _strict(out["items"])
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [_strict(o) if isinstance(o, Mapping) else o for o in out["anyOf"]]
    return out


def strict_schema(schema: Mapping[str, Any], *, tool: str | None = None) -> dict[str, Any]:
    """``schema`` in the form OpenAI's strict mode accepts (a new dict; ``schema`` is not changed).

    Optional properties become nullable and required, every object with properties is closed, and
    ``default`` is dropped. Raises :class:`SchemaError` naming the tool and the place when the
    schema cannot be made strict (a free-form object, a property without a type).
    """
    out = _strict(schema)
    faults = _problems(out, "")
    if faults:
        problems = [f"{_where(path)}: {text}" for path, text in faults]
        name = f"tool '{tool}'" if tool else "the schema"
        raise SchemaError(
            f"{name} cannot be offered in OpenAI strict mode: {'; '.join(problems)}; "
            "give every object its properties and every property a type, or offer it with strict=False",
            tool=tool,
            path=faults[0][0],
        )
    return out


def drop_nulls(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` without the nulls a strict-mode model sends for properties ``schema`` does not require.

    Only top-level optional properties whose own schema does not allow null are dropped: the tool
    sees the argument absent, as it would from a model without strict mode.
    """
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}
    out = {}
    for name, value in arguments.items():
        if value is None and name not in required and not _allows_null(properties.get(name)):
            continue
        out[name] = value
    return out


def _allows_null(schema: object) -> bool:
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    return (
        kind == "null" or (isinstance(kind, list) and "null" in kind) or {"type": "null"} in (schema.get("anyOf") or ())
    )


def openai_tool(spec: ToolSpec, *, strict: bool = False) -> dict[str, Any]:
    """``spec`` as an OpenAI function tool (Chat Completions' ``tools`` entry).

    ``{"type": "function", "function": {"name", "description", "parameters"[, "strict": true]}}``; with
    ``strict`` the parameters are :func:`strict_schema`'s (pass the model's arguments through
    :func:`drop_nulls`, or let dsh's turn do it). The Responses API takes the ``function`` object's
    fields one level up, beside ``"type": "function"``.
    """
    function: dict[str, Any] = {"name": spec.name, "description": spec.description}
    if strict:
        function["parameters"] = strict_schema(spec.parameters, tool=spec.name)
        function["strict"] = True
    else:
        function["parameters"] = _copy(spec.parameters)
    return {"type": "function", "function": function}


def anthropic_tool(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an Anthropic Messages API tool: ``{"name", "description", "input_schema"}``."""
    return {"name": spec.name, "description": spec.description, "input_schema": _copy(spec.parameters)}


def _copy(value: Any) -> Any:
    """A plain, independent copy (specs hold read-only mappings; API clients want dicts they may change)."""
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value
