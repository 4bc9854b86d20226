"""The store's one JSON codec (``dsh.session._json``): orjson, with dsh's rules for what it does not write itself."""

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

EXPECTED: dict[str, bytes | None] = {  # None: refused with a TypeError
    "plain": b'{"a":[1,2.5,"\xc3\xa9",null,true,false],"b":{"c":""}}',
    "control characters": b'"tab\\tnewline\\nquote\\"backslash\\\\nul\\u0000del\x7f\xe2\x80\xa8"',
    "record": b'{"p":{"x":1,"y":{"x":2,"y":[]}}}',
    "collections namedtuple": b'[{"left":1,"right":[2,3]}]',
    "plain tuple": b"[1,[2,3]]",
    "str subclass overriding str()": b'{"k":"value"}',
    "str subclass key": None,
    "int subclass": b"7",
    "bool": b"[true,false]",
    "dict and list subclasses": b'{"a":[1]}',
    "ordered dict": b'{"z":1,"a":2}',
    "enum": b'["red",[1,2],3,"a"]',
    "nan and infinities": b"[null,null,null]",
    "float spelling": b"[0.1,1.0,1000000000000000.0,1e+16,0.00001,123456789.12345679,-0.0]",
    "64-bit bounds": b"[-9223372036854775808,18446744073709551615]",
    "int above 64 bits": None,
    "int below 64 bits": None,
    "non-string key": None,
    "none key": None,
    "float subclass": None,
    "datetime": b'["2026-12-03T01:02:03.004500+00:00","2026-01-01T00:00:00"]',
    "datetime with an offset": b'"2026-01-01T00:00:00+05:30"',
    "date and time": b'["2026-01-02","01:02:03.000007","04:05:00"]',
    "time with a zone": None,
    "datetime subclass": None,
    "uuid": b'"00000000-0000-0000-0000-000000003039"',
    "dataclass": b'{"d":{"a":1,"b":{"x":2,"y":[]}}}',
    "dataclass class": None,
    "bytes": None,
    "set": None,
    "object": None,
    "deep but allowed": b"[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]",
    "a lone surrogate in an enum's value": b'{"m":"caf\\\\udce9"}',
    "a lone surrogate in a dataclass field": b'{"a":1,"b":"caf\\\\udce9"}',
    "a dataclass field never set": b'{"name":"x"}',
    "a dataclass's attribute that is not a field": b'{"name":"X"}',
    "a dataclass that is a tuple": b"[]",
    "a slotted dataclass whose slot is unset": b'{"a":1}',
    "an offset of seconds": b'"1900-01-01T00:00:00+00:19:32"',
    "a tzinfo that fails": None,
    "a tzinfo that does not know": b'"2020-01-01T00:00:00"',
    "a dict subclass overriding items": b'{"a":1}',
    "a list subclass overriding iter": b"[1]",
    "records nested 255": None,
    "lists around a record, 254": None,
    "a list holding itself": None,
    "nested 300": None,
    "nested 2000 dicts": None,
}
"""What each value of the corpus is stored as; the rest (long documents) are stored compact and read back."""


def _encode(value: Any) -> bytes | None:
    try:
        return json_bytes(value)
    except TypeError:
        return None


@pytest.mark.parametrize(("name", "value"), CORPUS, ids=[name for name, _ in CORPUS])
def test_each_value_is_stored_as_dsh_writes_it_or_refused(name: str, value: Any) -> None:
    stored = _encode(value)
    if name in EXPECTED:
        assert stored == EXPECTED[name]
        return
    assert stored is not None
    # compact, and written exactly as the standard library writes the plain value it stands for
    assert stored == json.dumps(json.loads(stored), ensure_ascii=False, separators=(",", ":")).encode()


def test_a_lone_surrogate_is_stored_escaped() -> None:
    assert json_loads(json_bytes({"k\udce9": "caf\udce9", "p": Point(1, "\ud800")})) == {
        "k\\udce9": "caf\\udce9",
        "p": {"x": 1, "y": "\\ud800"},
    }


READ = [
    (b'"\\ud83d\\ude00"', "\U0001f600"),
    (b'"caf\\\\udce9"', "caf\\udce9"),
    (b"18446744073709551615", 2**64 - 1),
    (b"18446744073709551616", 1.8446744073709552e19),  # outside 64 bits: a float
    (bytearray(b"{}"), {}),
    (memoryview(b"[1]"), [1]),
    (b'{"a":[1,2.5,"\xc3\xa9",null,true,false]}', {"a": [1, 2.5, "\u00e9", None, True, False]}),
    ('{"a":"\\u00e9\\n"}', {"a": "\u00e9\n"}),
    (b'{"a":1,"a":2}', {"a": 2}),
]
REFUSED = [
    b'"\\ud800"',
    b'"\\ud800\\u0041"',
    '"\ud800"',
    b"1e400",
    b"NaN",
    b"[Infinity]",
    b"\xff\xfe[]",
    b"\xef\xbb\xbf[]",
    b'"\xe9"',
    b"[1,]",
    b"",
    b"[" * 3000 + b"]" * 3000,
    b'{"a":1}x',
    b"\xff",
    b"[" * 100000,
    b"9" * 10000,
    None,
    1,
]


@pytest.mark.parametrize(("text", "value"), READ, ids=[repr(t)[:30] for t, _ in READ])
def test_a_document_is_read_as_its_value(text: Any, value: Any) -> None:
    assert json_loads(text) == value


@pytest.mark.parametrize("text", REFUSED, ids=[repr(t)[:30] for t in REFUSED])
def test_a_damaged_document_is_a_json_decode_error(text: Any) -> None:
    with pytest.raises(json.JSONDecodeError):
        json_loads(text)


def _events(count: int) -> list[SessionEvent]:
    return [SessionEvent(type="tool/result", data={"n": i, "f": 1e16, "p": Point(i)}) for i in range(count)]


@pytest.mark.parametrize("count", [1, 200])
def test_a_flush_encodes_to_the_same_bytes_every_time(count: int) -> None:
    events = _events(count)
    lines = encode_events("s", events, newline=True)
    assert lines == encode_events("s", events, newline=True)
    assert encode_batch("s", events) == encode_batch("s", events)  # PostgreSQL's unconfirmed-flush check
    assert [json.loads(line)["data"] for line in lines] == [
        {"n": i, "f": 1e16, "p": {"x": i, "y": []}} for i in range(count)
    ]
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    assert lines == [json_bytes(json.loads(line), newline=True) for line in lines]


def test_a_flush_escapes_an_odd_string_and_names_an_event_json_cannot_hold() -> None:
    events = _events(3)
    events[1] = SessionEvent(type="tool/result", data={"out": "caf\udce9"})
    lines = encode_events("s", events)
    assert json.loads(lines[1])["data"] == {"out": "caf\\udce9"} and len(lines) == 3
    events[2] = SessionEvent(type="odd/event", data={"set": {1}})
    with pytest.raises(PersistenceError, match=r"event 'odd/event' of session s cannot be stored as JSON"):
        encode_events("s", events)
