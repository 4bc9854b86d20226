"""The frames' JSON is the standard library's, read and written through its C core without ``json``'s
imports, surrogates included."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh.cli_fast._wire import decode, dumps, encode, loads

# Every code point, lone surrogates included: os.environ holds undecodable bytes as U+DC80..U+DCFF.
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_the_codec_reads_and_writes_what_json_does(value: Any) -> None:
    body = dumps(value)
    body.decode("utf-8")  # strict: the frame is valid UTF-8 even with lone surrogates inside
    assert json.loads(body) == value
    assert loads(body.decode("utf-8")) == value
    assert decode(encode({"v": value})[4:]) == {"v": value}
    assert loads(json.dumps(value)) == value  # ensure_ascii: surrogate pairs and \\u escapes
    assert loads(json.dumps(value, indent=2)) == value  # whitespace between tokens


def test_a_long_string_with_many_escapes_round_trips() -> None:
    text = 'line of output "quoted" \\ here\n' * 50_000
    assert loads(json.dumps({"stdout": text})) == {"stdout": text}


@pytest.mark.parametrize("bad", ['{"a": 1', '{"a" 1}', "[1 2]", '"\\x"', '"\\u12"', "nul", "1 2", '"open', ""])
def test_malformed_documents_get_jsons_own_error(bad: str) -> None:
    with pytest.raises(json.JSONDecodeError) as raised:
        loads(bad)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(bad)
    assert str(raised.value) == str(expected.value)


def test_surrounding_whitespace_is_read_as_json_reads_it() -> None:
    assert loads(' \n{"a": [1, 2.5]}\t ') == {"a": [1, 2.5]}


def test_what_has_no_json_form_is_refused() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps({"timeout": float("nan")})
    with pytest.raises(TypeError, match="bytes has no JSON form"):
        dumps({"argv": [b"raw"]})


def test_the_codec_needs_neither_json_nor_re() -> None:
    probe = (
        "import sys\n"
        "from dsh.cli_fast._wire import dumps, loads\n"
        "assert loads(dumps({'a': ['\\udcff', 1.5, None, True]}).decode()) == {'a': ['\\udcff', 1.5, None, True]}\n"
        "print(sorted({'json', 're', 'enum'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"
