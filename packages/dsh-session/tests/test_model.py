from __future__ import annotations

import ast
import copy
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh.session import (
    AgentRef,
    InvalidSessionIdError,
    SessionEvent,
    SessionFormatError,
    SessionHeader,
    SessionLocation,
    validate_session_id,
)

HOSTILE = ["../x", "a/b", "", "a\x00b", "x" * 300, "séance", "has space", "..", ".", ".hidden", "a\\b", "a\nb"]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_ids_are_rejected_before_any_path(bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        validate_session_id(bad)
    with pytest.raises(SessionFormatError, match=r"^field 'id' is not a safe session id") as err:
        SessionHeader(id=bad, cwd="/tmp")
    assert err.value.field == "id" and isinstance(err.value.__cause__, InvalidSessionIdError)
    with pytest.raises(SessionFormatError, match="field 'parent_session' is not a safe session id"):
        SessionHeader(id="child", cwd="/tmp", parent_session=bad)


def test_rejection_says_what_is_wrong() -> None:
    with pytest.raises(InvalidSessionIdError, match="300 characters long; the limit is 128"):
        validate_session_id("x" * 300)
    with pytest.raises(InvalidSessionIdError, match=r"disallowed character '/'") as err:
        validate_session_id("a/b")
    assert err.value.session_id == "a/b"
    with pytest.raises(InvalidSessionIdError, match="must be a string, not int"):
        validate_session_id(7)
    assert validate_session_id("x" * 128) == "x" * 128


@given(st.text(alphabet="abcXYZ019._-", min_size=1, max_size=128).filter(lambda s: s[0].isalnum()))
def test_safe_ids_are_accepted(value: str) -> None:
    assert validate_session_id(value) == value
    assert SessionHeader(id=value, cwd="/").id == value


def test_header_requires_absolute_cwd_and_keeps_lineage() -> None:
    with pytest.raises(
        SessionFormatError, match=r"^session s1: field 'cwd' must be an absolute path, not 'relative/dir'$"
    ):
        SessionHeader(id="s1", cwd="relative/dir")
    with pytest.raises(SessionFormatError, match="field 'cwd' contains a NUL character") as err:
        SessionHeader(id="s1", cwd="/a\x00b")
    assert (err.value.field, err.value.session_id) == ("cwd", "s1")
    header = SessionHeader(id="child", cwd="/w", parent_session="parent", origin="subagent", delegation_depth=1)
    assert header.to_dict() == {
        "id": "child",
        "created_at": header.created_at,
        "cwd": "/w",
        "parent_session": "parent",
        "origin": "subagent",
        "delegation_depth": 1,
        "seed_length": 0,
        "version": 1,
    }
    assert list(header.to_dict()) == list(SessionHeader.from_json(header.to_json()).to_dict())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"created_at": 5}, "field 'created_at' must be a string, not an integer"),
        (
            {"created_at": "\x1b[31mRED"},
            "field 'created_at' must be an ISO 8601 timestamp such as 2026-11-30T08:42:05+00:00, not '\\x1b[31mRED'",
        ),
        (
            {"created_at": "2026-11-30T08:42:05+00:00\n"},
            "field 'created_at' must be an ISO 8601 timestamp such as 2026-11-30T08:42:05+00:00, "
            "not '2026-11-30T08:42:05+00:00\\n'",
        ),
        (
            {"created_at": "\u0662\u0660\u0662\u0666-11-30"},  # Arabic-Indic digits: ISO 8601 is ASCII
            "field 'created_at' must be an ISO 8601 timestamp such as 2026-11-30T08:42:05+00:00, "
            "not '\u0662\u0660\u0662\u0666-11-30'",
        ),
        ({"origin": ["x"]}, "field 'origin' must be a string, not a list"),
        ({"delegation_depth": -1}, "field 'delegation_depth' must be a non-negative integer, not -1"),
        ({"delegation_depth": True}, "field 'delegation_depth' must be a non-negative integer, not a boolean"),
        ({"seed_length": 1.5}, "field 'seed_length' must be a non-negative integer, not a number"),
        ({"seed_length": "3"}, "field 'seed_length' must be a non-negative integer, not a string"),
        ({"version": 0}, "field 'version' must be a positive integer, not 0"),
        ({"version": 2}, "field 'version' is 2, newer than the format 1 this dsh-session reads; upgrade dsh-session"),
        ({"cwd": None}, "field 'cwd' must be a string, not null"),
    ],
)
def test_each_header_field_is_checked_and_named(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(SessionFormatError) as err:
        SessionHeader(**{"id": "s1", "cwd": "/w", **fields})
    assert str(err.value) == f"session s1: {message}" and err.value.problem == message
    assert err.value.field == next(iter(fields)) and err.value.session_id == "s1"
    with pytest.raises(SessionFormatError, match=re.escape(message)):
        SessionHeader.from_dict({"id": "s1", "cwd": "/w", **fields})


def test_a_stored_header_is_checked_like_a_new_one() -> None:
    header = SessionHeader(id="s1", cwd="/w", seed_length=3)
    assert SessionHeader.from_dict(header.to_dict()) == header
    assert SessionHeader.from_json(header.to_json().encode()) == header
    with pytest.raises(SessionFormatError, match=r"^session s1: field 'extra' is not a session header field"):
        SessionHeader.from_dict({**header.to_dict(), "extra": 1})
    with pytest.raises(SessionFormatError, match=r"^session s1: field 'cwd' is missing$"):
        SessionHeader.from_dict({"id": "s1"})
    with pytest.raises(SessionFormatError, match=r"^field 'id' is missing$"):
        SessionHeader.from_dict({"cwd": "/w"})
    with pytest.raises(SessionFormatError, match=r"^a session header must be a JSON object, not a list$") as err:
        SessionHeader.from_dict([])
    assert err.value.field is None
    with pytest.raises(SessionFormatError, match=r"^the session header is not JSON"):
        SessionHeader.from_json("{")
    defaulted = SessionHeader.from_dict({"id": "s2", "cwd": "/w"})
    assert defaulted.created_at and defaulted.version == 1 and defaulted.parent_session is None


def test_records_are_immutable_values() -> None:
    header = SessionHeader(id="s1", cwd="/w")
    with pytest.raises(AttributeError, match="can't set attribute"):
        header.cwd = "/other"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="can't delete attribute"):
        del header.cwd
    with pytest.raises(AttributeError, match="no attribute"):
        header.extra = 1  # type: ignore[attr-defined]  # __slots__ = (): no instance dict
    assert header == SessionHeader(id="s1", cwd="/w", created_at=header.created_at)
    assert header != SessionHeader(id="s1", cwd="/x", created_at=header.created_at)
    assert hash(header) == hash(copy.copy(header)) and {header: 1}[copy.deepcopy(header)] == 1
    assert pickle.loads(pickle.dumps(header)) == header
    assert "cwd='/w'" in repr(header)
    moved = header.replace(cwd="/other")
    assert moved.cwd == "/other" and moved.id == header.id and header.cwd == "/w"
    with pytest.raises(SessionFormatError, match="field 'cwd' must be an absolute path"):
        header.replace(cwd="rel")
    event = SessionEvent(type="x", data={"a": 1})
    with pytest.raises(TypeError):
        hash(event)  # its data is a dict
    assert pickle.loads(pickle.dumps(event)) == event


def test_events_check_their_fields() -> None:
    event = SessionEvent(type="tool/call", data={"name": "bash"})
    assert event.at > 0 and event.to_dict() == {"type": "tool/call", "at": event.at, "data": {"name": "bash"}}
    assert SessionEvent(type="x", at=3).at == 3.0 and isinstance(SessionEvent(type="x", at=3).at, float)
    assert SessionEvent(type="x").data == {}
    for fields, message in (
        ({"type": ""}, "field 'type' must be a non-empty string"),
        ({"type": 5}, "field 'type' must be a non-empty string, not an integer"),
        ({"type": "x", "at": "now"}, "field 'at' of a 'x' event must be a number, not a string"),
        ({"type": "x", "at": True}, "field 'at' of a 'x' event must be a number, not a boolean"),
        ({"type": "x", "data": [1]}, "field 'data' of a 'x' event must be an object, not a list"),
        # A record is no list (it is an object in dsh's JSON), and no dict either: named as what it is.
        (
            {"type": "x", "data": SessionHeader(id="s", cwd="/")},
            "field 'data' of a 'x' event must be an object, not a SessionHeader record",
        ),
        (
            {"type": "x", "data": AgentRef("main", SessionHeader(id="s", cwd="/"))},
            "field 'data' of a 'x' event must be an object, not an AgentRef record",
        ),
        ({"type": "x", "data": {1: "a"}}, "field 'data' of a 'x' event has a key that is not a string: 1"),
    ):
        with pytest.raises(SessionFormatError) as err:
            SessionEvent(**fields)
        assert str(err.value) == message and err.value.field == message.split("'")[1]


def test_a_stored_event_ignores_unknown_fields_and_defaults_what_is_missing() -> None:
    event = SessionEvent.from_dict({"type": "turn/start", "at": 1.5, "data": {"turn_id": "s:turn-1"}, "later": 1})
    assert event == SessionEvent(type="turn/start", at=1.5, data={"turn_id": "s:turn-1"})
    assert SessionEvent.from_dict({"type": "x", "at": None, "data": None}) == SessionEvent(type="x", at=0.0, data={})
    with pytest.raises(SessionFormatError, match=r"^field 'type' is missing$"):
        SessionEvent.from_dict({"at": 1})
    with pytest.raises(SessionFormatError, match=r"^a session event must be a JSON object, not a string$"):
        SessionEvent.from_dict("turn/start")


def test_a_location_has_an_absolute_path() -> None:
    location = SessionLocation(kind="jsonl", path="/s/x.jsonl")
    assert location.to_dict() == {"kind": "jsonl", "path": "/s/x.jsonl"} and hash(location)
    with pytest.raises(SessionFormatError, match=r"^field 'path' must be an absolute path, not 'x.jsonl'$"):
        SessionLocation(kind="jsonl", path="x.jsonl")
    with pytest.raises(SessionFormatError, match=r"^field 'kind' must be a string, not null$"):
        SessionLocation(kind=None, path="/x")  # type: ignore[arg-type]


def test_the_session_package_never_imports_pydantic() -> None:
    """The records are built on every exec and list: no validation library is imported for them."""
    import dsh.session

    package = Path(dsh.session.__file__).parent
    for source in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] == "pydantic" for n in names), f"{source.name} imports pydantic"


def test_new_ids_are_version_4_uuids_and_headers_are_stamped_in_utc() -> None:
    import uuid
    from datetime import UTC, datetime, timedelta

    from dsh.session._rules import new_session_id

    ids = {new_session_id() for _ in range(200)}
    assert len(ids) == 200
    for value in ids:
        parsed = uuid.UUID(value)
        assert str(parsed) == value and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    stamped = datetime.fromisoformat(SessionHeader(id="s", cwd="/").created_at)
    assert stamped.tzinfo == UTC and abs(datetime.now(UTC) - stamped) < timedelta(minutes=1)


@pytest.mark.parametrize(
    "stamp", ["2026-11-30T08:42:05.764711+00:00", "2026-11-30", "2026-11-30 08:42", "20261130T084205Z"]
)
def test_iso_8601_timestamps_are_taken(stamp: str) -> None:
    assert SessionHeader(id="s", cwd="/", created_at=stamp).created_at == stamp
