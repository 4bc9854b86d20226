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


class Mode(enum.Enum):
    ODD = "caf\udce9"


@dataclasses.dataclass
class Later:
    name: str
    result: int = dataclasses.field(init=False)


@dataclasses.dataclass
class Tagged:
    name: str

    def __post_init__(self) -> None:
        self.slug = self.name.lower()  # not a field


@dataclasses.dataclass
class Couple(tuple[Any, ...]):
    a: int = 1


@dataclasses.dataclass(slots=True)
class Slotted:
    a: int
    b: int = dataclasses.field(init=False)


class Broken(datetime.tzinfo):
    def utcoffset(self, dt: datetime.datetime | None) -> datetime.timedelta:
        raise RuntimeError("no offset")


class Unknown(datetime.tzinfo):
    def utcoffset(self, dt: datetime.datetime | None) -> None:
        return None


class Keys(dict[str, Any]):
    def items(self) -> Any:
        return [("z", 9)]


class Items(list[Any]):
    def __iter__(self) -> Any:
        return iter([9])


def _records(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = Point(value)
    return value


def _lists_around_a_record(depth: int) -> Any:
    value: Any = Point(1)
    for _ in range(depth):
        value = [value]
    return value


_loop: list[Any] = []
_loop.append(_loop)

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
    ("a lone surrogate in an enum's value", {"m": Mode.ODD}),
    ("a lone surrogate in a dataclass field", Plain(1, "caf\udce9")),
    ("a dataclass field never set", Later("x")),
    ("a dataclass's attribute that is not a field", Tagged("X")),
    ("a dataclass that is a tuple", Couple()),
    ("a slotted dataclass whose slot is unset", Slotted(1)),
    ("an offset of seconds", datetime.datetime(1900, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(seconds=1172)))),
    ("a tzinfo that fails", datetime.datetime(2020, 1, 1, tzinfo=Broken())),
    ("a tzinfo that does not know", datetime.datetime(2020, 1, 1, tzinfo=Unknown())),
    ("a dict subclass overriding items", Keys(a=1)),
    ("a list subclass overriding iter", Items([1])),
    ("records nested 254", _records(254)),
    ("records nested 255", _records(255)),
    ("lists around a record, 253", _lists_around_a_record(253)),
    ("lists around a record, 254", _lists_around_a_record(254)),
    ("a list holding itself", _loop),
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
    # compact, and written exactly as the standard library writes the plain value it stands for
    assert point == json.dumps(json.loads(point), ensure_ascii=False, separators=(",", ":")).encode()
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
    b'"\\ud800"',
    b'"\\udc00"',
    b'"\\ud800\\u0041"',
    b'"\\ud83d\\ude00"',
    b'"caf\\\\udce9"',
    '"\ud800"',
    b"1e400",
    b"[1e309]",
    b"-1e400",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"1" * 30,
    bytearray(b"{}"),
    memoryview(b"[1]"),
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


def _decode(text: Any, bulk: bool) -> Any:
    try:
        return bulk_loads()(text) if bulk else json_loads(text)
    except json.JSONDecodeError:
        return json.JSONDecodeError


@pytest.mark.parametrize(
    "text", DOCUMENTS, ids=[repr(bytes(d) if isinstance(d, memoryview) else d)[:30] for d in DOCUMENTS]
)
def test_the_point_and_the_bulk_decoder_read_the_same_or_both_refuse(text: Any) -> None:
    point, bulk = _decode(text, False), _decode(text, True)
    assert point == bulk, f"point {point!r} against bulk {bulk!r}"


def test_a_damaged_document_is_a_json_decode_error_for_the_point_decoder() -> None:
    for text in (b"\xff", b"[" * 100000, b"9" * 10000, b"[NaN]", None, 1):
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


def test_the_point_encoder_needs_one_frame_a_level_so_a_deep_caller_still_writes_the_deepest_document() -> None:
    def called_from(depth: int, document: Any) -> bytes:
        return called_from(depth - 1, document) if depth else json_bytes(document)

    assert called_from(300, _nested(254)) == json_bytes(_nested(254), bulk=True)
