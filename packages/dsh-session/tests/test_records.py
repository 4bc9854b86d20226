"""The records of dsh-session are NamedTuples: built checked, compared as tuples, copied and encoded alike."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import orjson
import pytest

from dsh.session import (
    EMPTY_MAPPING,
    AgentRef,
    SessionEvent,
    SessionFormatError,
    SessionHeader,
    SessionLocation,
    ToolExecution,
    ToolSpec,
)
from dsh.session.persistence import SessionScan, SessionTail, StoredSession, json_bytes

HEADER = SessionHeader(id="s1", cwd="/w", created_at="2026-12-02T03:00:00+00:00")
EVENT = SessionEvent(type="turn/start", at=1.5, data={"turn_id": "s1:turn-1"})
RECORDS: list[Any] = [
    HEADER,
    EVENT,
    SessionLocation(kind="jsonl", path="/s/x.jsonl"),
    AgentRef("main", HEADER),
    ToolExecution("bash", "call-1", {"command": "true"}, AgentRef("main", HEADER), "s1:turn-1", {"A": "b"}, None),
    ToolSpec("bash", "Runs a command.", {"type": "object"}),
    StoredSession(HEADER, (EVENT,), ("line 3 is damaged",)),
    SessionScan((HEADER,)),
    SessionTail(HEADER, 3),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_is_a_named_tuple_that_pickles_copies_and_encodes_as_an_object(record: Any) -> None:
    assert isinstance(record, tuple) and record._fields and not hasattr(record, "__dict__")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(record, protocol))
        assert again == record and type(again) is type(record)
    assert copy.copy(record) == record and copy.deepcopy(record) == record
    assert type(copy.deepcopy(record)) is type(record)
    assert list(orjson.loads(json_bytes(record))) == list(record._fields)  # an object of its fields


def test_records_compare_as_tuples_of_their_values() -> None:
    """The decision (dsh-session README): equality is the tuple's, by values, whatever the type."""
    location = SessionLocation(kind="jsonl", path="/s/x.jsonl")
    assert location == ("jsonl", "/s/x.jsonl") and hash(location) == hash(("jsonl", "/s/x.jsonl"))
    assert SessionTail(HEADER, 3) == (HEADER, 3) and SessionTail(HEADER, 3) != SessionTail(HEADER, 4)
    assert AgentRef("x", HEADER, "main") == AgentRef("x", HEADER) and {AgentRef("x", HEADER): 1}[AgentRef("x", HEADER)]
    assert HEADER.replace() == HEADER and HEADER.replace(cwd="/x") != HEADER


def test_checked_replace_and_unchecked_named_tuple_replace() -> None:
    with pytest.raises(SessionFormatError, match=r"^session s1: field 'cwd' must be an absolute path, not 'rel'$"):
        HEADER.replace(cwd="rel")
    assert HEADER._replace(cwd="rel").cwd == "rel"  # _replace and _make check nothing (they skip __new__)
    with pytest.raises(SessionFormatError, match=r"^field 'at' of a 'x' event must be a number, not a string$"):
        EVENT.replace(type="x", at="now")
    with pytest.raises(SessionFormatError, match=r"^field 'path' must be an absolute path, not 'x'$"):
        SessionLocation(kind="jsonl", path="/a").replace(path="x")


def test_checked_records_are_built_from_keywords_only() -> None:
    with pytest.raises(TypeError):
        SessionHeader("s1", "/w")  # type: ignore[misc]
    with pytest.raises(TypeError):
        SessionEvent("x")  # type: ignore[misc]
    with pytest.raises(TypeError):
        SessionLocation("jsonl", "/a")  # type: ignore[misc]


def test_a_tool_execution_defaults_its_mappings_to_the_shared_empty_one() -> None:
    execution = ToolExecution("bash", "call-1")
    assert execution.arguments is EMPTY_MAPPING and execution.env is EMPTY_MAPPING
    assert ToolExecution("bash", "call-1", None, env=None).env is EMPTY_MAPPING
    assert execution.agent is None and execution.session is None and execution.ambient is None
    assert ToolExecution("bash", "c", agent=AgentRef("main", HEADER)).session is HEADER
