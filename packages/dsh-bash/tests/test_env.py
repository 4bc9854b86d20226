from __future__ import annotations

import pytest

from dsh.bash import (
    DSH_ENV_PREFIX,
    BashExecRequest,
    ChannelError,
    LocalExecutor,
    declare_harness_identity,
    harness_identity_keys,
    is_managed_key,
)
from dsh.bash._env import build_child_env, compile_credential_pattern
from dsh.bash._local import shell_argv

AMBIENT = {
    "PATH": "/usr/bin",
    "DSH_STALE": "outer",
    "dsh_stale": "outer-lower",
    "Dsh_Session_Id": "outer-id",
    "AWS_SECRET_ACCESS_KEY": "s",
    "GITHUB_TOKEN": "t",
    "db_password": "p",
    "TERM": "xterm-256color",
    "LANG": "C.UTF-8",
}


def test_prefix_is_the_single_source() -> None:
    assert DSH_ENV_PREFIX == "DSH_"
    assert is_managed_key("DSH_X") and is_managed_key("dsh_x") and not is_managed_key("DSHX")


def test_child_env_is_built_in_order() -> None:
    env = build_child_env(
        AMBIENT,
        {"HOOK_VAR": "1", "PAGER": "less"},
        {"DSH_SESSION_ID": "current", "DSH_HOME": "/h"},
        credentials=compile_credential_pattern(),
    )
    assert {k for k in env if is_managed_key(k)} == {"DSH_SESSION_ID", "DSH_HOME"}
    assert env["DSH_SESSION_ID"] == "current"
    assert "AWS_SECRET_ACCESS_KEY" not in env and "GITHUB_TOKEN" not in env and "db_password" not in env
    assert env["NO_COLOR"] == "1" and env["TERM"] == "dumb" and env["GIT_PAGER"] == "cat"
    assert env["PAGER"] == "less"  # ordinary env comes after the terminal settings
    assert env["HOOK_VAR"] == "1" and env["LANG"] == "C.UTF-8"


def test_an_outer_harness_identity_never_passes_but_a_hooks_own_does() -> None:
    # dsh-bash names no peer: a hook dialect declares its peer's variables while it is loaded.
    outer = {"PEER_SESSION_ID": "outer-session", "PEER_ENV_FILE": "/outer/env", "OTHER_THREAD_ID": "outer-thread"}
    ambient = {**AMBIENT, **outer, "PEER_MARKER": "1", "peer_session_id": "a different name"}
    peer = declare_harness_identity(["PEER_SESSION_ID", "PEER_ENV_FILE"])
    other = declare_harness_identity(["OTHER_THREAD_ID", "PEER_ENV_FILE"])
    try:
        assert harness_identity_keys() >= set(outer)
        env = build_child_env(ambient, {}, {}, credentials=compile_credential_pattern())
        assert not set(outer) & set(env)
        # Names are exact (POSIX names are case-sensitive); a name nobody declared passes.
        assert env["PEER_MARKER"] == "1" and env["peer_session_id"] == "a different name"
        # A hook's own values come through the env channel, after the ambient was cleaned.
        own = build_child_env(ambient, {"PEER_SESSION_ID": "dsh-session"}, {})
        assert own["PEER_SESSION_ID"] == "dsh-session" and "PEER_ENV_FILE" not in own
        peer()
        peer()  # idempotent
        # Unloaded, its names pass again, but one another declaration holds stays out.
        env = build_child_env(ambient, {}, {}, credentials=compile_credential_pattern())
        assert env["PEER_SESSION_ID"] == "outer-session" and "PEER_ENV_FILE" not in env
    finally:
        peer()
        other()
    assert not harness_identity_keys() & set(outer)
    with pytest.raises(ValueError, match="without '='"):
        declare_harness_identity(["A=B"])


def test_pwsh_child_has_no_term() -> None:
    env = build_child_env(AMBIENT, {}, {}, shell="pwsh")
    assert "TERM" not in env and env["NO_COLOR"] == "1"


def test_credential_scrub_is_configurable() -> None:
    env = build_child_env(AMBIENT, {}, {}, credentials=compile_credential_pattern("^GITHUB_"))
    assert "GITHUB_TOKEN" not in env and env["AWS_SECRET_ACCESS_KEY"] == "s"
    assert "AWS_SECRET_ACCESS_KEY" in build_child_env(AMBIENT, {}, {}, credentials=compile_credential_pattern(None))


def test_each_pattern_keeps_its_own_verdicts_across_calls() -> None:
    # Verdicts per ambient name are remembered: a second pattern, or a value that changed, must not see stale ones.
    github, everything = compile_credential_pattern("^GITHUB_"), compile_credential_pattern("TOKEN|SECRET")
    for _ in range(2):
        assert "GITHUB_TOKEN" not in build_child_env(AMBIENT, {}, {}, credentials=github)
        assert "AWS_SECRET_ACCESS_KEY" not in build_child_env(AMBIENT, {}, {}, credentials=everything)
        assert build_child_env(AMBIENT, {}, {}, credentials=None)["GITHUB_TOKEN"] == AMBIENT["GITHUB_TOKEN"]
    changed = {**AMBIENT, "PLAIN": "changed"}
    assert build_child_env(changed, {}, {}, credentials=github)["PLAIN"] == "changed"
    many = {f"NAME_{n}": "v" for n in range(10_000)}  # more names than are remembered
    assert build_child_env(many, {}, {}, credentials=github).keys() >= many.keys()


@pytest.mark.parametrize(
    ("env", "dsh_env", "message"),
    [
        (
            {"DSH_SESSION_ID": "x"},
            {},
            "environment key 'DSH_SESSION_ID' is in the managed DSH_\\* namespace; pass it through the dsh_env channel",
        ),
        ({"dsh_sneaky": "x"}, {}, "'dsh_sneaky'.*dsh_env channel"),
        (
            {},
            {"HOME": "/x"},
            "dsh_env key 'HOME' does not start with DSH_ and is no trace-context carrier .*; "
            "pass it through the env channel",
        ),
        ({}, {"dsh_lower": "x"}, "dsh_env key 'dsh_lower'"),
    ],
)
def test_channel_violations_name_key_and_channel(env: dict[str, str], dsh_env: dict[str, str], message: str) -> None:
    with pytest.raises(ChannelError, match=message) as err:
        build_child_env({}, env, dsh_env)
    assert err.value.key in {**env, **dsh_env} and err.value.channel == ("env" if env else "dsh_env")


def test_argv_is_non_interactive() -> None:
    assert shell_argv("bash", "ls") == ("bash", "--noprofile", "--norc", "-c", "--", "ls")
    assert shell_argv("pwsh", "ls") == ("pwsh", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", "ls")


def test_spec_for_pwsh_without_the_binary() -> None:
    executor = LocalExecutor(ambient={"PATH": "/bin", "TERM": "xterm", "DSH_OLD": "1"})
    spec = executor.spec(BashExecRequest("Get-Date", shell="pwsh", dsh_env={"DSH_SHELL": "1"}, cwd="/tmp"))
    assert spec.argv[0] == "pwsh" and "-NoProfile" in spec.argv and spec.argv[-1] == "Get-Date"
    assert dict(spec.env) == {"PATH": "/bin", "NO_COLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat", "DSH_SHELL": "1"}
