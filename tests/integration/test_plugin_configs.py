"""Every dsh plugin's Config (NamedTuples, the record rule) accepts and refuses what its pydantic model did."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import dsh.loader
from dsh.agent.script import ScriptedConfig
from dsh.bash import LocalExecutorConfig
from dsh.bash_env import BashEnvConfig
from dsh.bash_sandbox import SandboxConfig
from dsh.bash_ssh import SshConfig
from dsh.core import FiberState, Plugin
from dsh.hooks import HooksConfig
from dsh.models.anthropic import AnthropicConfig
from dsh.models.openai import OpenAIConfig
from dsh.persistence.jsonl import JsonlConfig
from dsh.persistence.postgres import PostgresConfig
from dsh.persistence.sqlite import SqliteConfig
from dsh.session import EMPTY_MAPPING
from dsh.skills import SkillsConfig
from dsh.tool_bash import ShellToolConfig

EVERY = [
    BashEnvConfig,
    LocalExecutorConfig,
    ShellToolConfig,
    JsonlConfig,
    SqliteConfig,
    PostgresConfig,
    HooksConfig,
    SkillsConfig,
    SandboxConfig,
    AnthropicConfig,
    OpenAIConfig,
]
"""Every dsh plugin Config whose fields all have defaults."""

ALL = [*EVERY, SshConfig, ScriptedConfig]


@pytest.mark.parametrize("config_cls", ALL)
def test_every_dsh_config_is_a_named_tuple_with_no_mutable_default(config_cls: type) -> None:
    assert issubclass(config_cls, tuple) and hasattr(config_cls, "_fields"), f"{config_cls.__name__} is no NamedTuple"
    assert "__dataclass_fields__" not in vars(config_cls)
    for name, default in config_cls._field_defaults.items():  # type: ignore[attr-defined]
        assert not isinstance(default, (list, set)), f"{config_cls.__name__}.{name} defaults to a mutable {default!r}"
        assert not isinstance(default, dict) or default is EMPTY_MAPPING, f"{config_cls.__name__}.{name}"


def _validate(config_cls: type, raw: object) -> tuple[Any, str | None]:
    got: list[Any] = []
    fiber = dsh.loader.root().plugin(Plugin(name="p", apply=lambda ctx, cfg: got.append(cfg), Config=config_cls), raw)
    if fiber.state is FiberState.FAILED:
        return None, fiber.error
    return got[0], None


@pytest.mark.parametrize("config_cls", EVERY)
def test_an_empty_config_is_the_defaults_and_a_misspelt_field_is_named(config_cls: type) -> None:
    assert _validate(config_cls, None) == (config_cls(), None)
    assert _validate(config_cls, {}) == (config_cls(), None)
    _, error = _validate(config_cls, {"dsh_hom": "/x"})
    assert error == "plugin 'p' has invalid config: field 'config.dsh_hom' is not a known field (check its spelling)"


@pytest.mark.parametrize(
    ("config_cls", "raw", "message"),
    [
        (BashEnvConfig, {"resolve_timeout": 0}, "field 'config.resolve_timeout' must be greater than 0"),
        (
            BashEnvConfig,
            {"resolve_timeout": float("inf")},
            f"field 'config.resolve_timeout' must be a finite number of seconds up to {threading.TIMEOUT_MAX:.0f}, "
            "not inf",
        ),
        (BashEnvConfig, {"exclude": "x"}, "field 'config.exclude' must be a list"),
        (ShellToolConfig, {"default_timeout": -1}, "field 'config.default_timeout' must be greater than 0"),
        (ShellToolConfig, {"max_timeout": "soon"}, "field 'config.max_timeout' must be a number"),
        (LocalExecutorConfig, {"max_output": 1.5}, "field 'config.max_output' must be a whole number"),
        # -1 printed "showing the last -1 of 0 characters" over every stream, empty ones too; at
        # 0 the note said 0 and still showed the kept tail: nonsense limits are refused where every other check is.
        (LocalExecutorConfig, {"max_output": 0}, "field 'config.max_output' must be at least 1"),
        (LocalExecutorConfig, {"max_output": -1}, "field 'config.max_output' must be at least 1"),
        (
            LocalExecutorConfig,
            {"max_spill": -1},
            "field 'config.max_spill' must be 0 or more (or null for the default)",
        ),
        (SandboxConfig, {"max_output": 0}, "field 'config.max_output' must be at least 1"),
        (SandboxConfig, {"spill_budget": -1}, "field 'config.spill_budget' must be 0 or more"),
        (SshConfig, {"host": "h", "max_output": -3}, "field 'config.max_output' must be at least 1"),
        (SshConfig, {"host": " "}, "field 'config.host' must name the host"),
        (SshConfig, {"host": "h", "port": 0}, "field 'config.port' must be a TCP port, 1 to 65535"),
        (SshConfig, {"host": "h", "port": 70000}, "field 'config.port' must be a TCP port, 1 to 65535"),
        (
            SshConfig,
            {"host": "h", "connect_timeout": 0},
            "field 'config.connect_timeout' must be a positive, finite number",
        ),
        (
            SshConfig,
            {"host": "h", "connect_timeout": float("inf")},
            "field 'config.connect_timeout' must be a positive, finite",
        ),
        (SshConfig, {"host": "h", "max_sessions": 0}, "field 'config.max_sessions' must be at least 1"),
        (JsonlConfig, {"fsync": "maybe"}, "field 'config.fsync' must be true or false"),
        (SqliteConfig, {"synchronous": "EXTRA"}, "field 'config.synchronous' must be one of 'FULL', 'NORMAL' or 'OFF'"),
        (PostgresConfig, {"schema": "Public"}, "field 'config.schema' must be a plain lower-case SQL identifier"),
        (PostgresConfig, {"pool_min_size": -1}, "field 'config.pool_min_size' must be at least 0"),
        (PostgresConfig, {"pool_max_size": 0}, "field 'config.pool_max_size' must be at least 1"),
        (PostgresConfig, {"statement_timeout": 0}, "field 'config.statement_timeout' must be greater than 0"),
        (PostgresConfig, {"connect_timeout": -2}, "field 'config.connect_timeout' must be greater than 0"),
        (HooksConfig, {"ask": "maybe"}, "field 'config.ask' must be one of 'deny' or 'allow'"),
        (SkillsConfig, {"entry_points": "no way"}, "field 'config.entry_points' must be true or false"),
        (
            BashEnvConfig,
            {"deployment": "rel.yaml"},
            "field 'config.deployment' must be an absolute path, not 'rel.yaml'",
        ),
    ],
)
def test_invalid_values_are_refused_naming_the_field(config_cls: type, raw: object, message: str) -> None:
    _, error = _validate(config_cls, raw)
    assert error is not None and error.startswith("plugin 'p' has invalid config: ") and message in error


def test_valid_values_are_coerced_as_before() -> None:
    config, _ = _validate(ShellToolConfig, {"default_timeout": "5", "max_timeout": 60})
    assert config == ShellToolConfig(default_timeout=5.0, max_timeout=60.0)
    config, _ = _validate(PostgresConfig, {"schema": "fleet_1", "statement_timeout": None})
    assert (config.schema, config.statement_timeout) == ("fleet_1", None)
    config, _ = _validate(HooksConfig, {"claude": {"hooks": {}}, "codex": "/etc/codex.json"})
    assert config.claude == {"hooks": {}} and config.codex == "/etc/codex.json"


@pytest.mark.parametrize(
    ("config_cls", "field", "extra"),
    [
        (BashEnvConfig, "exclude", {}),
        (SkillsConfig, "exclude", {}),
        (HooksConfig, "claude_plugins", {}),
        (SandboxConfig, "hide", {}),
        (SshConfig, "shared", {"host": "h"}),
    ],
)
def test_a_yaml_list_is_a_tuple_field(config_cls: type, field: str, extra: dict[str, Any]) -> None:
    config, error = _validate(config_cls, {field: ["a", "b"], **extra})
    assert error is None and getattr(config, field) == ("a", "b")
    _, error = _validate(config_cls, {field: "a", **extra})
    assert error is not None and f"field 'config.{field}' must be a list" in error


def test_a_checked_config_reports_its_field_from_new_and_from_a_file_alike() -> None:
    for config_cls, raw, message in [
        (AnthropicConfig, {"max_tokens": 0}, "field 'config.max_tokens' must be at least 1"),
        (OpenAIConfig, {"timeout": 0}, "field 'config.timeout' must be a positive number of seconds"),
        (BashEnvConfig, {"policy": {"x": "maybe"}}, "field 'config.policy.x' must be one of 'required' or 'optional'"),
    ]:
        _, error = _validate(config_cls, raw)
        assert error is not None and message in error, error
    with pytest.raises(ValueError, match="field 'max_retries' must be 0 or more"):
        OpenAIConfig(max_retries=-1)
    assert BashEnvConfig(exclude=["a"]).exclude == ("a",)  # a checked config takes any sequence
