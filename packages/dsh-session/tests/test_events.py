"""The event table of the README is ``dsh.session.events``, and its checker names what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import get_type_hints

from dsh.session.events import EVENTS, HookReportData, ToolCallRecord, event_problems, type_name

README = Path(__file__).resolve().parents[1] / "README.md"


def _table_rows() -> list[tuple[str, str, str, str]]:
    text = README.read_text()
    start = text.index("<!-- event table:")
    body = text[start : text.index("<!-- end of event table -->")].splitlines()[3:]
    rows = []
    for line in body:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0], cells[1], cells[2], cells[3]))
    return rows


def _rendered() -> list[tuple[str, str, str, str]]:
    shapes: list[tuple[str, type]] = [(f"`{t}`", c) for t, c in EVENTS.items()]
    shapes += [("ToolCallRecord", ToolCallRecord), ("HookReportData", HookReportData)]
    return [
        (label, f"`{field}`", type_name(hint), "yes" if field in shape.__required_keys__ else "no")  # type: ignore[attr-defined]
        for label, shape in shapes
        for field, hint in get_type_hints(shape).items()
    ]


def test_the_readme_table_is_the_event_classes() -> None:
    assert _table_rows() == _rendered()


def test_a_valid_event_has_no_problem() -> None:
    data = {"call_id": "c1", "name": "bash", "output": "hi\n", "is_error": False, "data": {"exit_code": 0}}
    assert event_problems("tool/result", data) == []
    assert event_problems("turn/end", {"turn_id": "s:turn-1", "blocked": None}) == []


def test_problems_name_the_type_and_the_path() -> None:
    bad = {"call_id": "c1", "name": "bash", "output": 3, "is_error": 1, "data": {}, "extra": True}
    assert event_problems("tool/result", bad) == [
        "'tool/result' event: field 'extra' is not one ToolResultData lists",
        "'tool/result' event: field 'output' is an integer, not string",
        "'tool/result' event: field 'is_error' is an integer, not boolean",
    ]
    report = {"dialect": "claude", "event": "Stop", "command": "x", "blocked": False, "stop": False}
    report |= {"reason": None, "error": None, "exit_code": True}
    assert event_problems("hook/result", {"event": "Stop", "reports": [report]}) == [
        "'hook/result' event: field 'reports[0].exit_code' is a boolean, not integer or null"
    ]
    assert event_problems("error", {}) == ["'error' event: field 'message' is missing"]


def test_a_plugins_own_type_is_checked_only_when_strict() -> None:
    assert event_problems("acme/note", {"anything": 1}) == []
    (problem,) = event_problems("acme/note", {}, strict=True)
    assert problem.startswith("event type 'acme/note' is not one dsh records (known: turn/start, ")
