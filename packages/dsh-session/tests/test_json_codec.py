"""The store's two JSON encoders and two decoders keep one set of rules (``dsh.session._json``).

Point work goes through the standard library, bulk work through orjson; a flush's size picks one,
so any value they disagree on would be stored or refused depending on how many events came with it.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import uuid
from collections import OrderedDict, namedtuple
from typing import Any, NamedTuple

import pytest

from dsh.session import PersistenceError, SessionEvent
from dsh.session.persistence import (
    BULK_DOCUMENTS,
    bulk_loads,
    encode_batch,
    encode_events,
    json_bytes,
    json_loads,
)


class Point(NamedTuple):
    x: int
    y: Any = ()


class Colour(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


class Level(enum.IntEnum):
    HIGH = 3


class Mixed(str, enum.Enum):  # noqa: UP042 - the mixin, whose str() is its name, not its value
    A = "a"


class Text(str):
    def __str__(self) -> str:
        return "not the value"


class Number(int):
    pass


class Real(float):
    pass


class Table(dict[str, Any]):
    pass


class Row(list[Any]):
    pass


class Stamp(datetime.datetime):
    pass


@dataclasses.dataclass
class Plain:
    a: int
    b: Any = None
    _hidden: int = 3


Pair = namedtuple("Pair", "left right")

UTC = datetime.UTC
CORPUS: list[tuple[str, Any]] = [
    ("plain", {"a": [1, 2.5, "é", None, True, False], "b": {"c": ""}}),
    ("control characters", 'tab\tnewline\nquote"backslash\\nul\x00del\x7f\u2028'),
    ("record", {"p": Point(1, Point(2))}),
    ("collections namedtuple", [Pair(1, (2, 3))]),
    ("plain tuple", (1, (2, 3))),
    ("str subclass overriding str()", {"k": Text("value")}),
    ("str subclass key", {Text("key"): 1}),
    ("int subclass", Number(7)),
    ("bool", [True, False]),
    ("dict and list subclasses", Table(a=Row([1]))),
    ("ordered dict", OrderedDict(z=1, a=2)),
    ("enum", [Colour.RED, Colour.PAIR, Level.HIGH, Mixed.A]),
    ("nan and infinities", [math.nan, math.inf, -math.inf]),
    ("float spelling", [0.1, 1.0, 1e15, 1e16, 1e-5, 123456789.123456789, -0.0]),
    ("64-bit bounds", [-(2**63), 2**64 - 1]),
    ("int above 64 bits", 2**64),
    ("int below 64 bits", -(2**63) - 1),
    ("non-string key", {1: "a"}),
    ("none key", {None: "a"}),
    ("float subclass", Real(1.5)),
    ("datetime", [datetime.datetime(2026, 12, 3, 1, 2, 3, 4500, tzinfo=UTC), datetime.datetime(2026, 1, 1)]),
    (
        "datetime with an offset",
        datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30))),
    ),
    ("date and time", [datetime.date(2026, 1, 2), datetime.time(1, 2, 3, 7), datetime.time(4, 5)]),
    ("time with a zone", datetime.time(1, tzinfo=UTC)),
    ("datetime subclass", Stamp(2026, 1, 1)),
    ("uuid", uuid.UUID(int=12345)),
    ("dataclass", {"d": Plain(1, Point(2))}),
    ("dataclass class", Plain),
    ("bytes", b"x"),
    ("set", {1}),
    ("object", object()),
    ("deep but allowed", [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]),
]


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


_deep: dict[str, Any] = {}
_node = _deep
for _ in range(2000):
    _node["n"] = _node = {}
CORPUS += [("nested 200", _nested(200)), ("nested 300", _nested(300)), ("nested 2000 dicts", _deep)]


def _encode(value: Any, bulk: bool) -> bytes | type[BaseException]:
    try:
        return json_bytes(value, bulk=bulk)
    except TypeError:
        return TypeError


@pytest.mark.parametrize(("name", "value"), CORPUS, ids=[name for name, _ in CORPUS])
def test_the_point_and_the_bulk_encoder_store_the_same_json_or_both_refuse(name: str, value: Any) -> None:
    point, bulk = _encode(value, False), _encode(value, True)
    if point is TypeError or bulk is TypeError:
        assert point is bulk, f"{name}: point {point!r} against bulk {bulk!r}"
        return
    assert isinstance(point, bytes) and isinstance(bulk, bytes)
    assert json.loads(point) == json.loads(bulk)
    assert b" " not in point.replace(b'" "', b"") or name == "plain"  # compact: no separators' spaces
    if name != "float spelling":  # the one allowed difference: 1e-05 and 0.00001
        assert point == bulk


def test_the_encoders_differ_only_in_how_some_floats_are_spelt() -> None:
    values = [1e16, 1e-5, 1e-7, 0.1, 5e-324, 1.7976931348623157e308]
    point, bulk = json_bytes(values), json_bytes(values, bulk=True)
    assert point != bulk and json.loads(point) == json.loads(bulk) == values


@pytest.mark.parametrize("bulk", [False, True], ids=["point", "bulk"])
def test_a_lone_surrogate_is_stored_escaped_by_both(bulk: bool) -> None:
    assert json_loads(json_bytes({"k\udce9": "caf\udce9", "p": Point(1, "\ud800")}, bulk=bulk)) == {
        "k\\udce9": "caf\\udce9",
        "p": {"x": 1, "y": "\\ud800"},
    }


DOCUMENTS = [
    b'{"a":[1,2.5,"\xc3\xa9",null,true,false]}',
    '{"a":"\\u00e9\\n"}',
    b"  [1, 2 ]\n",
    b'{"a":1,"a":2}',
    b"NaN",
    b"[Infinity]",
    b"-Infinity",
    b'"\\ud83d\\ude00"',
    b"\xff\xfe[]",
    b"\xef\xbb\xbf[]",
    "\ufeff[]",
    b'"\xe9"',
    b"[1,]",
    b"{'a':1}",
    b"",
    b"[" * 3000 + b"]" * 3000,
    b"1" * 5000,
    b'{"a":1}x',
]


def _decode(text: str | bytes, bulk: bool) -> Any:
    try:
        return bulk_loads()(text) if bulk else json_loads(text)
    except json.JSONDecodeError:
        return json.JSONDecodeError


@pytest.mark.parametrize("text", DOCUMENTS, ids=[repr(d)[:30] for d in DOCUMENTS])
def test_the_point_and_the_bulk_decoder_read_the_same_or_both_refuse(text: str | bytes) -> None:
    point, bulk = _decode(text, False), _decode(text, True)
    assert point == bulk, f"point {point!r} against bulk {bulk!r}"


def test_a_damaged_document_is_a_json_decode_error_for_the_point_decoder() -> None:
    for text in (b"\xff", b"[" * 100000, b"9" * 10000, b"[NaN]"):
        with pytest.raises(json.JSONDecodeError):
            json_loads(text)


def _events(count: int) -> list[SessionEvent]:
    return [SessionEvent(type="tool/result", data={"n": i, "f": 1e16, "p": Point(i)}) for i in range(count)]


@pytest.mark.parametrize("count", [1, BULK_DOCUMENTS - 1, BULK_DOCUMENTS, 3 * BULK_DOCUMENTS])
def test_a_flush_encodes_to_the_same_bytes_every_time_on_either_side_of_the_bulk_line(count: int) -> None:
    events = _events(count)
    lines = encode_events("s", events, newline=True)
    assert lines == encode_events("s", events, newline=True)
    assert encode_batch("s", events) == encode_batch("s", events)  # PostgreSQL's unconfirmed-flush check
    assert [json.loads(line)["data"] for line in lines] == [
        {"n": i, "f": 1e16, "p": {"x": i, "y": []}} for i in range(count)
    ]
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    assert lines == [json_bytes(json.loads(line), newline=True, bulk=count >= BULK_DOCUMENTS) for line in lines]


@pytest.mark.parametrize("count", [3, BULK_DOCUMENTS + 6], ids=["point", "bulk"])
def test_a_flush_escapes_an_odd_string_and_names_an_event_json_cannot_hold_on_either_side(count: int) -> None:
    events = _events(count)
    events[1] = SessionEvent(type="tool/result", data={"out": "caf\udce9"})
    lines = encode_events("s", events)
    assert json.loads(lines[1])["data"] == {"out": "caf\\udce9"} and len(lines) == count
    events[2] = SessionEvent(type="odd/event", data={"set": {1}})
    with pytest.raises(PersistenceError, match=r"event 'odd/event' of session s cannot be stored as JSON"):
        encode_events("s", events)
