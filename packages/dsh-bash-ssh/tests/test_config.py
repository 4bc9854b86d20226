"""SshConfig repeats LocalExecutorConfig's fields (a NamedTuple inherits none): they must not drift."""

from __future__ import annotations

from typing import get_type_hints

from dsh.bash import LocalExecutorConfig
from dsh.bash_ssh import SshConfig


def test_the_local_executor_s_fields_follow_host_with_the_same_types_and_defaults() -> None:
    local = LocalExecutorConfig._fields
    assert SshConfig._fields[0] == "host" and "host" not in SshConfig._field_defaults  # the one required field
    assert SshConfig._fields[1 : 1 + len(local)] == local
    for name in local:
        assert get_type_hints(SshConfig)[name] == get_type_hints(LocalExecutorConfig)[name], name
        assert SshConfig._field_defaults[name] == LocalExecutorConfig._field_defaults[name], name


def test_a_python_caller_gives_shared_as_a_tuple() -> None:
    config = SshConfig(host="h", shared=("/srv/sessions",))
    assert (config.host, config.shared, config.port) == ("h", ("/srv/sessions",), 22)
    assert SshConfig(host="h").shared == ()
