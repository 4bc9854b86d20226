"""Plugin configs as dsh validates them (``dsh.loader.root()``): a pydantic model or a stdlib dataclass;
empty dataclass configs skip pydantic, others are validated by it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

import pytest

from dsh.core import FiberState, FieldError, Plugin
from dsh.loader import root


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    port: int = 8080
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise FieldError("port", "must be between 1 and 65535")


@dataclass(frozen=True, kw_only=True)
class NeedsPath:
    path: str


def _load(config_cls: type, raw: object) -> tuple[FiberState, str | None, object]:
    got: list[object] = []
    fiber = root().plugin(Plugin(name="server", apply=lambda ctx, cfg: got.append(cfg), Config=config_cls), raw)
    return fiber.state, fiber.error, got[0] if got else None


def test_an_empty_config_is_the_defaults() -> None:
    for raw in (None, {}):
        assert _load(ServerConfig, raw) == (FiberState.ACTIVE, None, ServerConfig())


def test_a_config_is_validated_and_coerced_like_a_pydantic_model() -> None:
    assert _load(ServerConfig, {"port": "9000", "tags": ["a"]})[2] == ServerConfig(port=9000, tags=["a"])


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
def test_invalid_configs_fail_naming_each_field(raw: object, message: str) -> None:
    state, error, _ = _load(ServerConfig, raw)
    assert state is FiberState.FAILED and error is not None
    assert error.startswith("plugin 'server' has invalid config: ") and message in error


def test_a_required_field_is_named_when_the_config_is_empty() -> None:
    state, error, _ = _load(NeedsPath, None)
    assert state is FiberState.FAILED and error == "plugin 'server' has invalid config: field 'config.path' is required"


def test_a_config_that_is_neither_a_model_nor_a_dataclass_is_refused() -> None:
    for raw in (None, {"port": 2}):
        state, error, _ = _load(dict, raw)
        assert state is FiberState.FAILED and error is not None and "neither a pydantic model nor a dataclass" in error


def test_field_error_names_its_field_when_raised_directly() -> None:
    with pytest.raises(FieldError, match="field 'port' must be between 1 and 65535") as err:
        ServerConfig(port=-1)
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
        assert "logging" not in sys.modules, "logging was imported"
        root().plugin(Plugin(name="p", apply=lambda ctx, cfg: None, Config=Config), {"port": 2})
        assert "pydantic" in sys.modules
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
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
