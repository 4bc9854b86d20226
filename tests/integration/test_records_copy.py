"""Records with their default fields pickle and deep-copy (an executor may ship a request elsewhere)."""

from __future__ import annotations

import copy
import pickle

import pytest

from dsh.bash import BashExecRequest
from dsh.core import EMPTY_MAPPING
from dsh.session import ToolResult


@pytest.mark.parametrize("record", [ToolResult("x"), BashExecRequest(command="true")])
def test_a_record_with_its_defaults_pickles_and_deep_copies(record: object) -> None:
    assert pickle.loads(pickle.dumps(record)) == record
    assert copy.deepcopy(record) == record
    assert copy.copy(record) == record


def test_the_shared_empty_default_is_read_only_and_stays_itself() -> None:
    assert EMPTY_MAPPING == {} and not EMPTY_MAPPING and len(EMPTY_MAPPING) == 0
    assert pickle.loads(pickle.dumps(EMPTY_MAPPING)) is EMPTY_MAPPING
    assert copy.deepcopy(EMPTY_MAPPING) is EMPTY_MAPPING
    with pytest.raises(TypeError):
        EMPTY_MAPPING["k"] = "v"  # type: ignore[index]
    with pytest.raises(KeyError):
        EMPTY_MAPPING["k"]
    assert ToolResult("x").data is BashExecRequest(command="true").env is EMPTY_MAPPING
