"""Review regression: an exception whose ``str()`` raises is still only its contributor's failure."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import pytest

from dsh.bash_env import BashEnvRegistry, CollectionError, FunctionContributor
from dsh.bash_env._resolve import MAX_OVERDUE
from dsh.session import ToolExecution


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() broken")


def test_an_unprintable_exception_fails_its_call_at_once_and_never_counts_as_stuck() -> None:
    registry = BashEnvRegistry("/h", resolve_timeout=1.0)

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        raise Unprintable

    registry.register(FunctionContributor("odd", {"DSH_ODD": "o"}, resolve))
    threads = threading.active_count()
    for _ in range(MAX_OVERDUE + 1):
        with pytest.raises(CollectionError, match=r"^contributor 'odd' raised Unprintable"):
            registry.collect(ToolExecution("bash", "c"))
    assert threading.active_count() <= threads + 1  # no worker died and was replaced per call
