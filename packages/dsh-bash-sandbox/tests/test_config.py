"""SandboxConfig repeats LocalExecutorConfig's fields (a NamedTuple inherits none): they must not drift."""

from __future__ import annotations

from typing import get_type_hints

from dsh.bash import LocalExecutorConfig
from dsh.bash_sandbox import SandboxConfig


def test_the_local_executor_s_fields_come_first_with_the_same_types_and_defaults() -> None:
    local = LocalExecutorConfig._fields
    assert SandboxConfig._fields[: len(local)] == local
    for name in local:
        assert get_type_hints(SandboxConfig)[name] == get_type_hints(LocalExecutorConfig)[name], name
        assert SandboxConfig._field_defaults[name] == LocalExecutorConfig._field_defaults[name], name


def test_a_python_caller_gives_hide_as_a_tuple_and_the_defaults_are_immutable() -> None:
    config = SandboxConfig(hide=("~/.ssh",), max_output=10)
    assert (config.hide, config.max_output, config.mode) == (("~/.ssh",), 10, "read-only")
    assert SandboxConfig().hide == ()
