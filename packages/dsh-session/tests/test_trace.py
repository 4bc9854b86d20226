"""W3C trace context in environment variables (``dsh.session.trace``), and the outer claim a header records."""

from __future__ import annotations

import pytest

from dsh.session import SessionHeader, sanitise_claim
from dsh.session.trace import (
    BAGGAGE,
    TRACEPARENT,
    TRACESTATE,
    TraceContext,
    incoming,
    parse_traceparent,
    start_run,
    valid_baggage,
    valid_tracestate,
)

GOOD = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (GOOD, ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "01")),
        (
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
            ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00"),
        ),
        (
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03",
            ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "01"),
        ),
        (
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "01"),
        ),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", None),
        ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None),
        ("00-" + "0" * 32 + "-b7ad6b7169203331-01", None),
        ("00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01", None),
        ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", None),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", None),
        ("", None),
        (None, None),
    ],
)
def test_traceparent_is_read_as_w3c_says(value: object, parsed: tuple[str, str, str] | None) -> None:
    assert parse_traceparent(value) == parsed


def test_tracestate_and_baggage_pass_only_well_formed() -> None:
    assert valid_tracestate("vendor=abc,other@tenant=x y") == "vendor=abc,other@tenant=x y"
    assert valid_tracestate("Vendor=abc") is None  # keys are lower case
    assert valid_tracestate("a=1,a=2") is None  # a key twice
    assert valid_tracestate(",".join(f"k{i}=v" for i in range(33))) is None  # more than 32 members
    assert valid_tracestate("a=" + "x" * 600) is None
    assert valid_baggage("team=dsh,env=ci;prop") == "team=dsh,env=ci;prop"
    assert valid_baggage("x") is None and valid_baggage("a=\x00") is None and valid_baggage("a=" + "x" * 9000) is None


def test_an_incoming_context_is_continued_and_a_child_gets_its_own_span() -> None:
    handed = incoming({TRACEPARENT: GOOD, TRACESTATE: "vendor=abc", BAGGAGE: "team=dsh"})
    assert handed == TraceContext(
        "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "01", "vendor=abc", "team=dsh"
    )
    child = handed.child()
    assert child.trace_id == handed.trace_id and child.span_id not in (None, handed.span_id)
    assert child.carrier() == {
        TRACEPARENT: f"00-{handed.trace_id}-{child.span_id}-01",
        TRACESTATE: "vendor=abc",
        BAGGAGE: "team=dsh",
    }


def test_malformed_or_absent_values_start_a_new_trace_and_are_never_passed_on() -> None:
    assert incoming({}) is None
    bad = {TRACEPARENT: "00-" + "0" * 32 + "-b7ad6b7169203331-01", TRACESTATE: "vendor=abc", BAGGAGE: "x"}
    assert incoming(bad) is None
    run = start_run(bad)
    assert run.span_id is None and run.trace_id != "0" * 32
    assert run.carrier() == {}  # a root with no span yet has nothing to hand on
    assert run.child().carrier().keys() == {TRACEPARENT}
    assert start_run({}).trace_id != start_run({}).trace_id  # a new trace per run
    # Only the upper-case names are carriers: a lower-case one is ambient, never read.
    assert incoming({"traceparent": GOOD}) is None
    # Baggage alone is carried into a new trace.
    alone = incoming({BAGGAGE: "team=dsh"})
    assert alone is not None and alone.span_id is None and alone.baggage == "team=dsh"


def test_an_unsampled_parent_stays_unsampled() -> None:
    handed = incoming({TRACEPARENT: GOOD[:-2] + "00"})
    assert handed is not None and not handed.sampled
    assert handed.child().carrier()[TRACEPARENT].endswith("-00")


def test_a_header_records_an_outer_claim_sanitised_and_round_trips_it() -> None:
    claim = sanitise_claim("../../etc/\x1b[31mpasswd" + "x" * 300)
    assert claim is not None and len(claim) == 128 and claim.startswith("../../etc/?[31mpasswd")
    assert sanitise_claim("") is None and sanitise_claim(None) is None
    header = SessionHeader(id="inner", cwd="/work", outer_session=claim, outer_call="call-1")
    again = SessionHeader.from_dict(header.to_dict())
    assert (again.outer_session, again.outer_call) == (claim, "call-1")
    # A malformed claim is kept in the header only: it is never a parent.
    assert header.lineage_parent is None
    assert SessionHeader(id="inner", cwd="/work", outer_session="outer-1").lineage_parent == "outer-1"
    subagent = SessionHeader(id="sub", cwd="/work", parent_session="main", origin="subagent", delegation_depth=1)
    assert subagent.lineage_parent == "main"
    # A header without a claim is written without the fields (older readers still read it).
    assert "outer_session" not in SessionHeader(id="plain", cwd="/work").to_dict()


def test_a_stored_claim_that_is_not_printable_ascii_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="outer_call"):
        SessionHeader.from_dict({"id": "s", "created_at": "2026-01-01T00:00:00Z", "cwd": "/w", "outer_call": "a\nb"})
