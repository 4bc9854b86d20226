from __future__ import annotations

import json
from typing import NamedTuple

import orjson
import pytest

from dsh.session import PersistenceError, SessionEvent, SessionFormatError, SessionLocation
from dsh.session.persistence import (
    batch_last_turn,
    decode_batch,
    encode_batch,
    encode_event,
    json_bytes,
    json_default,
    storable,
    turn_number,
)


def _turn(n: int, **data: object) -> SessionEvent:
    return SessionEvent(type="turn/start", at=1.0, data={"turn_id": f"s:turn-{n}", **data})


def test_a_batch_is_one_json_array_with_each_event_on_its_own_line() -> None:
    events = [_turn(1), SessionEvent(type="tool/result", at=2.0, data={"output": "a\nb", "nested": [{"x": 1}]})]
    text = encode_batch("s", events)
    assert json.loads(text) == [e.to_dict() for e in events]
    assert text.count("\n") == len(events) + 1  # a newline inside a string is escaped
    assert decode_batch(text) == events
    assert encode_event("s", events[0], newline=True) == json_bytes(events[0].to_dict()) + b"\n"


def test_strings_utf8_cannot_encode_are_escaped_not_refused() -> None:
    event = SessionEvent(type="tool/result", at=1.0, data={"stdout": "caf\udce9", "\ud800": 1})
    (stored,) = decode_batch(encode_batch("s", [event]))
    assert stored.data == {"stdout": "caf\\udce9", "\\ud800": 1}
    assert storable({"a": ("\udce9",)}) == {"a": ["\\udce9"]} and storable(3) == 3


def test_an_event_json_cannot_hold_is_named_with_its_session() -> None:
    bad = SessionEvent(type="custom/x", data={"value": object()})
    with pytest.raises(PersistenceError, match=r"^event 'custom/x' of session s1 cannot be stored as JSON") as err:
        encode_batch("s1", [_turn(1), bad])
    assert err.value.session_id == "s1"


def test_a_damaged_batch_is_a_format_error() -> None:
    with pytest.raises(SessionFormatError, match="not JSON"):
        decode_batch("[\n{")
    with pytest.raises(SessionFormatError, match="must be a JSON list"):
        decode_batch('{"type":"x"}')
    with pytest.raises(SessionFormatError, match="field 'type' must be a non-empty string"):
        decode_batch('[{"type":""}]')


def test_the_last_turn_is_read_without_parsing_the_batch() -> None:
    events = [_turn(4), SessionEvent(type="tool/call", data={"turn_id": "s:turn-9"}), _turn(5), _turn(5, extra=1)]
    assert batch_last_turn(encode_batch("s", events)) == 5
    assert batch_last_turn(encode_batch("s", [SessionEvent(type="tool/call")])) is None
    # A turn/start nested in an event's data is not a turn of this session.
    nested = SessionEvent(
        type="subagent/end", data={"events": [{"type": "turn/start", "data": {"turn_id": "c:turn-7"}}]}
    )
    assert batch_last_turn(encode_batch("s", [_turn(2), nested])) == 2
    # The line is found by its start; a damaged one is reported, not guessed.
    text = encode_batch("s", [_turn(2)]).replace('"s:turn-2"}', '"s:turn-2"')
    with pytest.raises(SessionFormatError, match="not a JSON object"):
        batch_last_turn(text)
    with pytest.raises(SessionFormatError, match="no turn id"):
        batch_last_turn(encode_batch("s", [SessionEvent(type="turn/start", data={"turn_id": 3})]))


def test_a_batch_in_the_compact_layout_is_parsed_whole() -> None:
    """Flushes stored before each event had its own line: compact JSON arrays."""
    compact = json.dumps([_turn(3).to_dict(), SessionEvent(type="x", at=1.0).to_dict()], separators=(",", ":"))
    assert batch_last_turn(compact) == 3 and len(decode_batch(compact)) == 2
    assert batch_last_turn("[]") is None


def test_turn_numbers() -> None:
    assert turn_number("abc:turn-12") == 12 and turn_number("turn-12") is None and turn_number(12) is None


class _Point(NamedTuple):
    x: int
    y: tuple[int, ...]


class _Pair(tuple[int, int]):
    """A tuple subclass that is not a record."""


def test_records_are_objects_of_their_fields_in_the_stores_json() -> None:
    location = SessionLocation(kind="jsonl", path="/s/x.jsonl")
    data = {"point": _Point(1, (2, 3)), "nested": [{"at": _Point(4, ())}], "where": location, "pair": _Pair((5, 6))}
    assert orjson.loads(json_bytes(data)) == {
        "point": {"x": 1, "y": [2, 3]},
        "nested": [{"at": {"x": 4, "y": []}}],
        "where": {"kind": "jsonl", "path": "/s/x.jsonl"},
        "pair": [5, 6],
    }
    assert json_default(_Point(1, ())) == {"x": 1, "y": ()} and json_default(_Pair((1, 2))) == [1, 2]
    with pytest.raises(TypeError, match="not JSON serializable: object"):
        json_default(object())
    # The escaping retry keeps the rule: a record holding a lone surrogate is still an object.
    assert orjson.loads(json_bytes({"p": _Point("caf\udce9", ())})) == {"p": {"x": "caf\\udce9", "y": []}}  # type: ignore[arg-type]
    assert storable(_Point("\ud800", ("\udce9",))) == {"x": "\\ud800", "y": ["\\udce9"]}  # type: ignore[arg-type]
