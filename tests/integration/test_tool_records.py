"""A tool's ``data`` holding records (``NamedTuple``s): objects of their fields, live and read back alike."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from dsh.agent import Agent, ModelStep, ScriptedModel, ToolCall
from dsh.bash import ExecResult
from dsh.session import SESSIONS, TOOLS, ToolExecution, ToolResult, ToolSpec
from tests.helpers import harness

pytestmark = pytest.mark.integration


class Point(NamedTuple):
    x: int
    y: int


class _Records:
    spec = ToolSpec("records", "Returns records in its data.", {"type": "object", "properties": {}})

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        return ToolResult(
            "ok",
            data={
                "exec": ExecResult(3, "o", "e"),
                "points": [Point(1, 2), (3, 4)],
                "nested": {"at": Point(5, 6), "plain": ["a", 1, None, 2.5, True]},
                "when": Path("/x"),  # not JSON: recorded as its str(), live too
                "counts": {1: "one"},  # JSON keys are strings: live too
            },
        )


def _recorded(tmp_path: Path, tool: Any, calls: int = 1) -> tuple[list[Any], list[Any], Path]:
    """Run ``calls`` calls of ``tool`` in one turn; the data of each live ``tool/result`` event, the same
    read back from a resumed session, and the transcript's path."""
    runtime = harness(tmp_path)
    try:
        runtime.ctx.require(TOOLS).register(tool)
        store = runtime.ctx.require(SESSIONS)
        session = store.create(tmp_path)
        steps = [ModelStep(tool_calls=[ToolCall(name=tool.spec.name)]) for _ in range(calls)]
        asyncio.run(Agent(runtime.ctx, session, ScriptedModel([[*steps, ModelStep(text="done")]])).run_turn("go"))
        live = [e.data["data"] for e in session.history if e.type == "tool/result"]
        back = [e.data["data"] for e in store.resume(session.id).history if e.type == "tool/result"]
        return live, back, Path(session.locate().path)  # type: ignore[union-attr]
    finally:
        runtime.close()


def test_records_in_data_are_objects_of_their_fields_and_read_back_as_recorded(tmp_path: Path) -> None:
    (live,), (back,), path = _recorded(tmp_path, _Records())
    expected = {
        "exec": {
            "exit_code": 3,
            "stdout": "o",
            "stderr": "e",
            "timed_out": False,
            "duration": 0.0,
            "stdout_spill": None,
            "stderr_spill": None,
            "status_known": True,
            "sandbox": None,
        },
        "points": [{"x": 1, "y": 2}, [3, 4]],
        "nested": {"at": {"x": 5, "y": 6}, "plain": ["a", 1, None, 2.5, True]},
        "when": "/x",
        "counts": {"1": "one"},
    }
    assert live == expected
    assert back == live
    line = next(json.loads(t) for t in path.read_text().splitlines() if '"tool/result"' in t)
    assert line["data"]["data"]["exec"]["exit_code"] == 3  # an object in the file, not a positional array


class _Odd:
    spec = ToolSpec("odd", "Returns values the store's JSON would change or refuse.", {"type": "object"})

    def __init__(self) -> None:
        cycle: dict[str, Any] = {"name": "loop"}
        cycle["self"] = cycle
        deep: Any = "bottom"
        for _ in range(300):
            deep = [deep]
        self.data = {
            "size": 2**64,
            "negative": -(2**63) - 1,
            "ratio": float("nan"),
            "ceiling": float("inf"),
            "pairs": {(1, 2): "x", True: "t", None: "n", 1.5: "f"},
            "cycle": cycle,
            "deep": deep,
            "fine": {"int": 2**63, "float": 0.5},
        }

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        return ToolResult("ok", data=self.data)


def test_values_the_store_would_change_or_refuse_cost_neither_turn_nor_session(tmp_path: Path) -> None:
    (live,), (back,), _ = _recorded(tmp_path, _Odd())
    assert live["size"] == str(2**64) and live["negative"] == str(-(2**63) - 1)
    assert live["ratio"] is None and live["ceiling"] is None
    assert live["pairs"] == {"(1, 2)": "x", "true": "t", "null": "n", "1.5": "f"}
    assert live["cycle"] == {"name": "loop", "self": "<cycle>"}
    assert live["fine"] == {"int": 2**63, "float": 0.5}
    depth, node = 0, live["deep"]
    while isinstance(node, list):
        depth, node = depth + 1, node[0]
    assert node == "<nested too deep>" and depth < 255
    assert back == live


class _Todo:
    spec = ToolSpec("todo", "Adds an item and returns the list.", {"type": "object", "properties": {}})

    def __init__(self) -> None:
        self.items: list[str] = []

    async def __call__(self, arguments: Mapping[str, Any], execution: ToolExecution) -> ToolResult:
        self.items.append(f"item{len(self.items) + 1}")
        return ToolResult(f"{len(self.items)} items", data={"items": self.items})  # its own, growing list


def test_a_tool_result_is_recorded_as_it_was_returned_not_as_the_tool_later_changed_it(tmp_path: Path) -> None:
    live, back, _ = _recorded(tmp_path, _Todo(), calls=2)
    assert back == live == [{"items": ["item1"]}, {"items": ["item1", "item2"]}]
