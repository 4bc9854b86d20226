"""A small JSON codec for the frames between ``dsh exec`` and ``dsh serve``, with no imports at all.

The standard :mod:`json` pulls in :mod:`re` (and with it :mod:`enum`), a measurable part of a
served ``dsh exec``, whose whole budget is a few interpreter start-ups. This covers what the frames
hold: objects with string keys, arrays, strings, integers, finite floats, booleans and null.

Strings may carry lone surrogates (``os.environ`` and ``sys.argv`` hold undecodable bytes as
``surrogateescape`` surrogates): :func:`dumps` writes them as ``\\udcXX`` escapes, so the frame is
valid UTF-8 and any JSON parser (the server uses :mod:`json`) gives back the very same string, and
with it the exact bytes. :func:`loads` is meant for what a dsh server sends; the server parses what
clients send with :mod:`json`, which is hardened against hostile input.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from typing import Any

_ESCAPE = {i: f"\\u{i:04x}" for i in range(0x20)}
_ESCAPE.update({0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_UNESCAPE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SPACE = " \t\n\r"
_NUMBER = "+-0123456789.eE"


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON; lone surrogates become ``\\uXXXX`` escapes."""
    parts: list[str] = []
    _dump(value, parts)
    # Surrogates can only stand inside strings, where `\\udcXX` is exactly their JSON escape.
    return "".join(parts).encode("utf-8", "backslashreplace")


def _quote(text: str) -> str:
    # translate() is slow per character: most strings (names, paths, values) need no escape at all.
    if '"' in text or "\\" in text or not text.isprintable():
        text = text.translate(_ESCAPE)
    return f'"{text}"'


def _dump(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} has no JSON form")
        out.append(float.__repr__(value))
    elif isinstance(value, dict):
        out.append("{")
        for n, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, not {type(key).__name__}")
            out.append(f"{',' if n else ''}{_quote(key)}:")
            _dump(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for n, item in enumerate(value):
            if n:
                out.append(",")
            _dump(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} has no JSON form")


def loads(text: str) -> Any:
    """The value of the JSON document ``text``; raise :class:`ValueError` naming the offset at fault."""
    value, end = _value(text, _skip(text, 0))
    if _skip(text, end) != len(text):
        raise ValueError(f"extra data at offset {end}")
    return value


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _value(text: str, i: int) -> tuple[Any, int]:
    first = text[i : i + 1]
    if first == '"':
        return _string(text, i + 1)
    if first == "{":
        obj: dict[str, Any] = {}
        i = _skip(text, i + 1)
        if text[i : i + 1] == "}":
            return obj, i + 1
        while True:
            if text[i : i + 1] != '"':
                raise ValueError(f"a string key is expected at offset {i}")
            key, i = _string(text, i + 1)
            i = _skip(text, i)
            if text[i : i + 1] != ":":
                raise ValueError(f"':' is expected at offset {i}")
            obj[key], i = _value(text, _skip(text, i + 1))
            i = _skip(text, i)
            if text[i : i + 1] == ",":
                i = _skip(text, i + 1)
            elif text[i : i + 1] == "}":
                return obj, i + 1
            else:
                raise ValueError(f"',' or '}}' is expected at offset {i}")
    if first == "[":
        array: list[Any] = []
        i = _skip(text, i + 1)
        if text[i : i + 1] == "]":
            return array, i + 1
        while True:
            item, i = _value(text, i)
            array.append(item)
            i = _skip(text, i)
            if text[i : i + 1] == ",":
                i = _skip(text, i + 1)
            elif text[i : i + 1] == "]":
                return array, i + 1
            else:
                raise ValueError(f"',' or ']' is expected at offset {i}")
    for word, constant in (("null", None), ("true", True), ("false", False)):
        if text.startswith(word, i):
            return constant, i + len(word)
    end = i
    while end < len(text) and text[end] in _NUMBER:
        end += 1
    token = text[i:end]
    try:
        return (float(token) if any(c in token for c in ".eE") else int(token)), end
    except ValueError:
        raise ValueError(f"a JSON value is expected at offset {i}") from None


def _string(text: str, i: int) -> tuple[str, int]:
    """The string whose body starts at ``i``, and the offset after its closing quote."""
    parts = []
    quote = -1
    while True:
        # The quote is searched again only once passed (it was an escaped one), and escapes only
        # before it, so a long string with many escapes is still read in one pass.
        if quote < i:
            quote = text.find('"', i)
            if quote < 0:
                raise ValueError(f"unterminated string from offset {i}")
        backslash = text.find("\\", i, quote)
        if backslash < 0:
            parts.append(text[i:quote])
            return "".join(parts), quote + 1
        parts.append(text[i:backslash])
        kind = text[backslash + 1 : backslash + 2]
        if kind != "u":
            if kind not in _UNESCAPE:
                raise ValueError(f"invalid escape at offset {backslash}")
            parts.append(_UNESCAPE[kind])
            i = backslash + 2
            continue
        code = _hex4(text, backslash + 2)
        i = backslash + 6
        if 0xD800 <= code < 0xDC00 and text.startswith("\\u", i):
            low = _hex4(text, i + 2)
            if 0xDC00 <= low < 0xE000:  # a surrogate pair: one character beyond the BMP
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                i += 6
        parts.append(chr(code))


def _hex4(text: str, i: int) -> int:
    digits = text[i : i + 4]
    if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise ValueError(f"invalid \\u escape at offset {i - 2}")
    return int(digits, 16)
