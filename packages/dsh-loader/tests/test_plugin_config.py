"""Plugin configs as dsh validates them (``dsh.loader.root()``): a NamedTuple (dsh's own kind), a stdlib
dataclass or a pydantic model; empty configs of the first two skip pydantic, others are validated by it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Annotated, Literal, NamedTuple

import pytest
from pydantic import BaseModel, ConfigDict, Field

from dsh.core import FiberState, FieldError, Plugin
from dsh.loader import root
from dsh.session import EMPTY_MAPPING


@dataclass(frozen=True, kw_only=True)
class DataclassServer:
    port: int = 8080
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise FieldError("port", "must be between 1 and 65535")


class _Server(NamedTuple):
    port: int = 8080
    tags: tuple[str, ...] = ()


class NamedTupleServer(_Server):
    """A checked NamedTuple, as dsh's own configs are (the record rule)."""

    __slots__ = ()

    def __new__(cls, port: int = 8080, tags: tuple[str, ...] = ()) -> NamedTupleServer:
        if not 0 < port < 65536:
            raise FieldError("port", "must be between 1 and 65535")
        return super().__new__(cls, port, tags)


KINDS = [pytest.param(DataclassServer, list, id="dataclass"), pytest.param(NamedTupleServer, tuple, id="namedtuple")]


@dataclass(frozen=True, kw_only=True)
class NeedsPath:
    path: str


class NeedsPathTuple(NamedTuple):
    path: str
    mode: str = "r"


def _load(config_cls: type, raw: object) -> tuple[FiberState, str | None, object]:
    got: list[object] = []
    fiber = root().plugin(Plugin(name="server", apply=lambda ctx, cfg: got.append(cfg), Config=config_cls), raw)
    return fiber.state, fiber.error, got[0] if got else None


@pytest.mark.parametrize(("kind", "seq"), KINDS)
def test_an_empty_config_is_the_defaults(kind: type, seq: type) -> None:
    for raw in (None, {}):
        assert _load(kind, raw) == (FiberState.ACTIVE, None, kind())


@pytest.mark.parametrize(("kind", "seq"), KINDS)
def test_a_config_is_validated_and_coerced_like_a_pydantic_model(kind: type, seq: type) -> None:
    got = _load(kind, {"port": "9000", "tags": ["a"]})[2]
    assert got == kind(port=9000, tags=seq(["a"])) and type(got) is kind and type(got.tags) is seq  # type: ignore[attr-defined]


@pytest.mark.parametrize(("kind", "seq"), KINDS)
@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"port": "many"}, "field 'config.port' must be a whole number"),
        ({"port": 0}, "field 'config.port' must be between 1 and 65535"),
        ({"prot": 1}, "field 'config.prot' is not a known field (check its spelling)"),
        ({"tags": "a", "x": 1}, "field 'config.tags' must be a list; field 'config.x' is not a known field"),
        ([1], "field 'config' must be a mapping"),
    ],
)
def test_invalid_configs_fail_naming_each_field(kind: type, seq: type, raw: object, message: str) -> None:
    state, error, _ = _load(kind, raw)
    assert state is FiberState.FAILED and error is not None
    assert error.startswith("plugin 'server' has invalid config: ") and message in error


class Watched(NamedTuple):
    paths: Sequence[str] = ()


@pytest.mark.parametrize("given", ["a", None, 3, {"a": 1}])
def test_a_sequence_field_given_anything_but_a_list_must_be_a_list(given: object) -> None:
    # pydantic words these its own way ('str' instances are not allowed as a Sequence value; an instance of Sequence).
    state, error, _ = _load(Watched, {"paths": given})
    assert state is FiberState.FAILED
    assert error == "plugin 'server' has invalid config: field 'config.paths' must be a list"


@pytest.mark.parametrize("kind", [NeedsPath, NeedsPathTuple])
def test_a_required_field_is_named_when_the_config_is_empty(kind: type) -> None:
    state, error, _ = _load(kind, None)
    assert state is FiberState.FAILED and error == "plugin 'server' has invalid config: field 'config.path' is required"


class _Bad(NamedTuple):
    port: int = 0


class Bad(_Bad):
    __slots__ = ()

    def __new__(cls, port: int = 0) -> Bad:
        if port < 1:
            raise FieldError("port", "must be at least 1")
        return super().__new__(cls, port)


def test_a_default_a_checked_config_refuses_is_the_plugin_s_defect_named() -> None:
    state, error, _ = _load(Bad, None)
    assert (state, error) == (
        FiberState.FAILED,
        "plugin 'server' has invalid config: field 'config.port' must be at least 1",
    )


class Limit(NamedTuple):
    name: str
    value: int = 1


class Limits(NamedTuple):
    first: Limit | None = None
    more: tuple[Limit, ...] = ()


def test_a_nested_record_of_a_named_tuple_config_is_a_mapping_never_a_list_of_values() -> None:
    state, _, got = _load(Limits, {"first": {"name": "a"}, "more": [{"name": "b", "value": "2"}]})
    assert (state, got) == (FiberState.ACTIVE, Limits(Limit("a"), (Limit("b", 2),)))
    assert type(got.more[0]) is Limit  # type: ignore[union-attr]
    # pydantic alone would build Limit('a', 3) from a list: in a file, a record is always its fields by name
    state, error, _ = _load(Limits, {"first": ["a", 3], "more": [["b"], {"name": "c", "extra": 1}]})
    assert error == (
        "plugin 'server' has invalid config: field 'config.more[1].extra' is not a known field (check its spelling); "
        "field 'config.first' must be a mapping; field 'config.more[0]' must be a mapping"
    )


class Knobs(NamedTuple):
    port: int = 22
    timeout: float | None = None
    verbose: bool = False
    either: int | bool = 0
    weights: tuple[float, ...] = ()
    limits: tuple[Limit, ...] = ()
    named: Mapping[str, Limit] = EMPTY_MAPPING
    counts: Mapping[str, int] = EMPTY_MAPPING
    several: Limit | int | None = None
    numbers: int | tuple[int, ...] = 0


def test_a_boolean_is_never_a_number_of_a_named_tuple_config() -> None:
    # pydantic's lax mode reads YAML's true as 1: port 1, a one-character max_output
    state, error, _ = _load(
        Knobs, {"port": True, "timeout": False, "weights": [0.5, True], "limits": [{"name": "a", "value": True}]}
    )
    assert state is FiberState.FAILED
    assert error == (
        "plugin 'server' has invalid config: field 'config.port' must be a whole number; "
        "field 'config.timeout' must be a number; field 'config.weights[1]' must be a number; "
        "field 'config.limits[0].value' must be a whole number"
    )
    # ... and so are a mapping's values; a record there is a mapping of its fields too
    state, error, _ = _load(
        Knobs, {"counts": {"a": 1, "b": True}, "named": {"x": [5], "y": {"name": "y", "value": True}}}
    )
    assert error == (
        "plugin 'server' has invalid config: field 'config.counts.b' must be a whole number; "
        "field 'config.named.x' must be a mapping; field 'config.named.y.value' must be a whole number"
    )
    # Below a union of several types pydantic names each member; its own problems are reported, at the right field
    state, error, _ = _load(Knobs, {"several": {"name": "a", "value": "x"}, "numbers": [1, "y"]})
    assert error is not None and "config.several.value" in error and "config.numbers[1]" in error
    # A field that takes booleans keeps them, and numbers stay numbers (a whole one where a float is asked)
    state, _, got = _load(Knobs, {"verbose": True, "either": True, "timeout": 3, "weights": [1, 2.5]})
    assert (state, got) == (FiberState.ACTIVE, Knobs(verbose=True, either=True, timeout=3, weights=(1, 2.5)))


def test_a_config_that_is_none_of_the_three_kinds_is_refused() -> None:
    for raw in (None, {"port": 2}):
        state, error, _ = _load(dict, raw)
        assert state is FiberState.FAILED
        assert error == "plugin 'server' has a Config that is not a NamedTuple, a dataclass or a pydantic model"


def test_field_error_names_its_field_when_raised_directly() -> None:
    with pytest.raises(FieldError, match="field 'port' must be between 1 and 65535") as err:
        DataclassServer(port=-1)
    with pytest.raises(FieldError, match="field 'port' must be between 1 and 65535"):
        NamedTupleServer(port=-1)
    assert (err.value.field, err.value.reason) == ("port", "must be between 1 and 65535")


def test_the_kernel_and_an_empty_dataclass_config_never_import_pydantic() -> None:
    code = textwrap.dedent(
        """
        import sys
        from dataclasses import dataclass
        from dsh.core import FiberState, Plugin
        from dsh.loader import root

        @dataclass
        class Config:
            port: int = 1

        fiber = root().plugin(Plugin(name="p", apply=lambda ctx, cfg: None, Config=Config), {})
        assert fiber.state is FiberState.ACTIVE, fiber.error
        assert "pydantic" not in sys.modules, "pydantic was imported"
        root().plugin(Plugin(name="p", apply=lambda ctx, cfg: None, Config=Config), {"port": 2})
        assert "pydantic" in sys.modules
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


EMPTY_NAMED_TUPLE_CONFIG = """
import sys
from typing import NamedTuple
from dsh.core import FiberState, Plugin
from dsh.loader import PluginEntry, Deployment, root

class Config(NamedTuple):
    port: int = 1

fiber = root().plugin(Plugin(name="p", apply=lambda ctx, cfg: None, Config=Config), {})
assert fiber.state is FiberState.ACTIVE, fiber.error
Deployment(plugins=[PluginEntry(id="p")])
assert "pydantic" not in sys.modules, "pydantic was imported"
root().plugin(Plugin(name="p", apply=lambda ctx, cfg: None, Config=Config), {"port": 2})
assert "pydantic" in sys.modules
"""


def test_the_loader_and_an_empty_named_tuple_config_never_import_pydantic() -> None:
    done = subprocess.run([sys.executable, "-c", EMPTY_NAMED_TUPLE_CONFIG], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_pydantic_model_config_refuses_an_unknown_field_naming_it() -> None:
    # pydantic ignores unknown fields of a model that does not say otherwise: a typo would boot.
    from pydantic import BaseModel, ConfigDict, Field

    class Ticket(BaseModel):
        ticket: str
        owner: str = Field(default="", alias="assignee")

    state, error, _ = _load(Ticket, {"ticket": "T-1", "prio": 2})
    assert state is FiberState.FAILED
    assert error == "plugin 'server' has invalid config: field 'config.prio' is not a known field (check its spelling)"
    state, error, _ = _load(Ticket, {"prio": 2})  # with the model's own errors, each named
    assert error == (
        "plugin 'server' has invalid config: field 'config.ticket' is required; "
        "field 'config.prio' is not a known field (check its spelling)"
    )
    state, _, got = _load(Ticket, {"ticket": "T-1", "assignee": "ana"})  # an alias is a known field
    assert state is FiberState.ACTIVE and got == Ticket(ticket="T-1", assignee="ana")

    class Open(BaseModel):  # a model that chose to allow extras keeps its choice
        model_config = ConfigDict(extra="allow")
        ticket: str

    state, _, got = _load(Open, {"ticket": "T-1", "prio": 2})
    assert state is FiberState.ACTIVE and got == Open(ticket="T-1", prio=2)


def test_invalid_config_names_the_field() -> None:
    from pydantic import BaseModel

    class Config(BaseModel):
        port: int

    fiber = root().plugin(Plugin(name="server", apply=lambda ctx, cfg: None, Config=Config), {"port": "many"})
    assert fiber.state is FiberState.FAILED
    assert fiber.error is not None
    assert "plugin 'server' has invalid config" in fiber.error and "field 'config.port'" in fiber.error


def test_valid_config_reaches_apply() -> None:
    from pydantic import BaseModel

    class Config(BaseModel):
        port: int = 80

    got: list[int] = []
    root().plugin(Plugin(name="server", apply=lambda ctx, cfg: got.append(cfg.port), Config=Config), {"port": "8080"})
    assert got == [8080]


class Inner(NamedTuple):
    port: int = 0


class Union(NamedTuple):
    settings: dict[str, str] | str | None = None
    size: int | list[str] = 0
    modes: dict[str, bool] = {}  # noqa: RUF012 (a test record, never mutated)
    lists: dict[str, list[int]] = {}  # noqa: RUF012
    server: Inner | str = ""
    level: Annotated[int, Field(ge=1)] | list[str] = 1


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # One problem at the field, in words, not one per member named by pydantic
        # ("field 'config.settings.dict[str,str]' must be a mapping; field 'config.settings.str' ...").
        ({"settings": ["a"]}, "field 'config.settings' must be a mapping or a string"),
        ({"size": "big"}, "field 'config.size' must be a whole number or a list"),
        ({"server": 5}, "field 'config.server' must be a mapping or a string"),
        ({"level": "x"}, "field 'config.level' must be a whole number or a list"),
        # A member that got further into the value says what to fix there.
        ({"size": ["a", 3]}, "field 'config.size[1]' must be a string"),
        ({"settings": {"k": 3}}, "field 'config.settings.k' must be a string"),
        ({"server": {"port": "x"}}, "field 'config.server.port' must be a whole number"),
        # Keys of a mapping that look like type names are keys, not union members, however many.
        ({"modes": {"str": "x"}}, "field 'config.modes.str' must be true or false"),
        (
            {"modes": {"str": "x", "int": "maybe", "a[b]": "z"}},
            "field 'config.modes.str' must be true or false; field 'config.modes.int' must be true or false; "
            "field 'config.modes.a[b]' must be true or false",
        ),
        (
            {"lists": {"str": ["a"], "int": "b"}},
            "field 'config.lists.str[0]' must be a whole number; field 'config.lists.int' must be a list",
        ),
    ],
)
def test_a_field_of_several_types_gets_one_problem_in_words(raw: object, message: str) -> None:
    fiber = root().plugin(Plugin(name="p", apply=lambda ctx, config: None, Config=Union), raw)
    assert fiber.state is FiberState.FAILED
    assert fiber.error == f"plugin 'p' has invalid config: {message}"


class Level(IntEnum):
    LOW = 1
    HIGH = 2


class Tuned(NamedTuple):
    level: Level = Level.LOW
    mode: Literal[1, 2, 3] = 1
    flag: Literal[True, 1] = 1
    name: Literal["a", "b"] = "a"


@dataclass
class TunedDataclass:
    port: int = 1
    level: Level = Level.LOW
    limits: tuple[Limit, ...] = ()


class TunedModel(BaseModel):
    port: int = 1
    ratio: float = 0.5
    inner: TunedDataclass | None = None


class StrictModel(BaseModel):
    model_config = ConfigDict(strict=True)
    port: int = 1


def test_a_boolean_is_no_member_of_a_numeric_enum_or_literal() -> None:
    # pydantic reads YAML's `on` as the member 1 of an IntEnum and the 1 of a Literal[1, 2, 3]
    state, error, _ = _load(Tuned, {"level": True, "mode": True})
    assert state is FiberState.FAILED
    assert error == (
        "plugin 'server' has invalid config: field 'config.level' must be one of 1 or 2; "
        "field 'config.mode' must be one of 1, 2 or 3"
    )
    # a Literal that names True takes it; members and strings are read as before
    state, _, got = _load(Tuned, {"flag": True, "level": 2, "mode": 3, "name": "b"})
    assert (state, got) == (FiberState.ACTIVE, Tuned(level=Level.HIGH, mode=3, flag=True, name="b"))


@pytest.mark.parametrize("kind", [TunedDataclass, TunedModel])
def test_a_boolean_is_never_a_number_of_a_dataclass_or_model_config(kind: type) -> None:
    state, error, _ = _load(kind, {"port": True})
    assert (state, error) == (
        FiberState.FAILED,
        "plugin 'server' has invalid config: field 'config.port' must be a whole number",
    )
    nested = {"inner": {"level": False, "limits": [{"name": "a", "value": True}]}}
    state, error, _ = _load(TunedModel, nested)
    assert error == (
        "plugin 'server' has invalid config: field 'config.inner.level' must be one of 1 or 2; "
        "field 'config.inner.limits[0].value' must be a whole number"
    )
    state, _, got = _load(TunedModel, {"port": 7, "ratio": 1, "inner": {"level": 2}})
    assert state is FiberState.ACTIVE and got == TunedModel(port=7, ratio=1.0, inner=TunedDataclass(level=Level.HIGH))


def test_a_strict_model_s_own_refusal_is_reported_once() -> None:
    state, error, _ = _load(StrictModel, {"port": True})
    assert state is FiberState.FAILED and error is not None
    assert error.count("config.port") == 1, error
