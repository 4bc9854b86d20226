"""The served client's small JSON codec agrees with the standard library's, surrogates included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh.cli._fast._json_lite import dumps, loads
from dsh.cli._fast._wire import encode

# Every code point, lone surrogates included: os.environ holds undecodable bytes as U+DC80..U+DCFF.
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_each_side_reads_what_the_other_writes(value: Any) -> None:
    body = dumps(value)
    body.decode("utf-8")  # strict: the frame is valid UTF-8 even with lone surrogates inside
    assert json.loads(body) == value
    assert loads(body.decode("utf-8")) == value
    served = encode({"v": value})[4:]  # the server's encoder (the standard library's json)
    assert loads(served.decode("utf-8")) == {"v": value}
    assert loads(json.dumps(value)) == value  # ensure_ascii: surrogate pairs and \\u escapes


def test_a_long_string_with_many_escapes_is_read_in_one_pass() -> None:
    text = 'line of output "quoted" \\ here\n' * 50_000
    assert loads(json.dumps({"stdout": text})) == {"stdout": text}


@pytest.mark.parametrize("bad", ['{"a": 1', '{"a" 1}', "[1 2]", '"\\x"', '"\\u12"', "nul", "1 2", '"open'])
def test_malformed_documents_are_errors(bad: str) -> None:
    with pytest.raises(ValueError, match="offset"):
        loads(bad)
