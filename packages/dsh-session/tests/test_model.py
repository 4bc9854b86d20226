from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from dsh.session import InvalidSessionIdError, SessionHeader, validate_session_id

HOSTILE = ["../x", "a/b", "", "a\x00b", "x" * 300, "séance", "has space", "..", ".", ".hidden", "a\\b", "a\nb"]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_ids_are_rejected_before_any_path(bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        validate_session_id(bad)
    with pytest.raises(ValidationError):
        SessionHeader(id=bad, cwd="/tmp")


def test_rejection_says_what_is_wrong() -> None:
    with pytest.raises(InvalidSessionIdError, match="300 characters long; the limit is 128"):
        validate_session_id("x" * 300)
    with pytest.raises(InvalidSessionIdError, match=r"disallowed character '/'") as err:
        validate_session_id("a/b")
    assert err.value.session_id == "a/b"


@given(st.text(alphabet="abcXYZ019._-", min_size=1, max_size=128).filter(lambda s: s[0].isalnum()))
def test_safe_ids_are_accepted(value: str) -> None:
    assert validate_session_id(value) == value


def test_header_requires_absolute_cwd_and_keeps_lineage() -> None:
    with pytest.raises(ValidationError, match="not absolute"):
        SessionHeader(id="s1", cwd="relative/dir")
    header = SessionHeader(id="child", cwd="/w", parent_session="parent", origin="subagent", delegation_depth=1)
    assert header.model_dump()["parent_session"] == "parent"
