"""Records pickle, copy and encode as JSON with their defaults and with a real snapshot (an executor
may ship a request to another process; a tool may put a record's fields into its data)."""

from __future__ import annotations

import copy
import json
import pickle

import orjson
import pytest

from dsh.bash import BashExecRequest
from dsh.bash_env import BashEnvRegistry, FunctionContributor
from dsh.session import EMPTY_MAPPING, ReadOnlyDict, ToolExecution, ToolResult


@pytest.mark.parametrize("record", [ToolResult("x"), BashExecRequest(command="true")])
def test_a_record_with_its_defaults_pickles_copies_and_encodes(record: ToolResult | BashExecRequest) -> None:
    assert pickle.loads(pickle.dumps(record)) == record
    assert copy.deepcopy(record) == record
    assert copy.copy(record) == record
    assert json.loads(json.dumps(record._asdict()))["output" if isinstance(record, ToolResult) else "env"] is not None


def test_a_request_with_a_collected_snapshot_pickles() -> None:
    registry = BashEnvRegistry("/h")
    registry.register(FunctionContributor("x", {"DSH_X": "a value"}, lambda execution: {"DSH_X": execution.call_id}))
    snapshot = registry.collect(ToolExecution("bash", "call-1"))
    request = BashExecRequest(command="true", dsh_env=snapshot)
    again = pickle.loads(pickle.dumps(request))
    assert again == request and again.dsh_env["DSH_X"] == "call-1"
    with pytest.raises(TypeError, match="read-only"):
        snapshot["DSH_X"] = "forged"  # type: ignore[index]


def test_the_shared_empty_default_is_a_read_only_dict_that_stays_itself() -> None:
    assert EMPTY_MAPPING == {} and not EMPTY_MAPPING and isinstance(EMPTY_MAPPING, dict)
    assert pickle.loads(pickle.dumps(EMPTY_MAPPING)) is EMPTY_MAPPING
    assert copy.deepcopy(EMPTY_MAPPING) is EMPTY_MAPPING and copy.copy(EMPTY_MAPPING) is EMPTY_MAPPING
    assert json.dumps(EMPTY_MAPPING) == "{}" and orjson.dumps(EMPTY_MAPPING) == b"{}"
    assert EMPTY_MAPPING | {"a": 1} == {"a": 1} == {"a": 1} | EMPTY_MAPPING
    assert EMPTY_MAPPING.copy() == {}
    for mutate in (
        lambda: EMPTY_MAPPING.__setitem__("k", "v"),
        lambda: EMPTY_MAPPING.update(k="v"),
        lambda: EMPTY_MAPPING.setdefault("k", "v"),
        lambda: EMPTY_MAPPING.__delitem__("k"),
        lambda: EMPTY_MAPPING.clear(),
        lambda: EMPTY_MAPPING.pop("k"),
        lambda: EMPTY_MAPPING.popitem(),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    assert EMPTY_MAPPING == {}
    assert ToolResult("x").data is BashExecRequest(command="true").env is EMPTY_MAPPING
    assert pickle.loads(pickle.dumps(ReadOnlyDict(a="b"))) == {"a": "b"}


def _checked_records() -> list[type[tuple[object, ...]]]:
    """Every checked record of dsh's: a subclass of a NamedTuple with a ``__new__`` of its own (the record rule)."""
    import importlib
    from pathlib import Path

    found = []
    for source in sorted(Path(__file__).parents[2].glob("packages/*/src/dsh/**/*.py")):
        parts = source.with_suffix("").parts
        name = ".".join(parts[parts.index("src") + 1 :]).removesuffix(".__init__")
        if name.endswith("__main__"):
            continue  # running it is the command
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == name
                and "__new__" in vars(value)
                and any(hasattr(base, "_fields") for base in value.__bases__)
            ):
                found.append(value)
    return found


def test_a_checked_records_new_keeps_the_defaults_of_its_fields() -> None:
    """A checked record repeats its fields in ``__new__`` (a typed signature); a default that drifted
    from the field's would differ between ``Config()`` and pydantic or ``_make``."""
    import inspect

    records = _checked_records()
    assert len(records) >= 10, records  # the configs, the deployment records, the session records
    for record in records:
        parameters = inspect.signature(record.__new__).parameters
        fields: tuple[str, ...] = getattr(record, "_fields")  # noqa: B009 (a NamedTuple's, typed here)
        defaults: dict[str, object] = getattr(record, "_field_defaults")  # noqa: B009
        assert set(fields) <= set(parameters), f"{record.__qualname__}.__new__ misses fields"
        for name, default in defaults.items():
            given = parameters[name].default
            assert given is default or given == default, (
                f"{record.__module__}.{record.__qualname__}: __new__ defaults {name} to {given!r}, "
                f"the field to {default!r}"
            )
