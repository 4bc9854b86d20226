"""W3C trace context in environment variables, as OpenTelemetry's environment-carrier rules have it.

This module owns the carrier names (``TRACEPARENT``, ``TRACESTATE``, ``BAGGAGE``) and the one
reading and writing of their values; every other package derives from it (the executor drops the
ambient ones, bash-env hands each child its own). It imports nothing of OpenTelemetry: the W3C
formats are small, and a cold ``dsh exec`` must not pay for an SDK it does not use.

A run continues the context it is handed (its ``TRACEPARENT``; ``TRACESTATE`` only with a valid
one) or starts a new trace; every call of the run (a turn, a tool call) is a span of its own, whose
id comes from ``os.urandom``. A child is handed the span of its own call, never the value the
harness was handed: an ambient ``TRACEPARENT`` never passes through unchanged. ``TRACESTATE`` and
``BAGGAGE`` pass through unchanged when well-formed; a malformed value is dropped, never passed on.
"""

import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Final, NamedTuple

TRACEPARENT: Final = "TRACEPARENT"
TRACESTATE: Final = "TRACESTATE"
BAGGAGE: Final = "BAGGAGE"
CARRIER_NAMES: Final = frozenset({TRACEPARENT, TRACESTATE, BAGGAGE})
"""The environment variables that carry trace context: managed facts, like ``DSH_*``."""

MAX_TRACESTATE: Final = 512
"""Longest ``TRACESTATE`` passed on (W3C: at least 512 characters must propagate; 32 members at most)."""
MAX_BAGGAGE: Final = 8192
"""Longest ``BAGGAGE`` passed on (the W3C Baggage limit for a whole header)."""

# The carriers' grammars, as patterns ``re`` compiles (and keeps) the first time a carrier is read:
# most runs are handed none, and compiling the four costs about 3 M instructions (a tenth of a
# millisecond) of every cold ``dsh exec`` (benchmarks README, "2026-12-07 evening, the cold exec").
_TRACEPARENT = r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?"
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_TRACESTATE_MEMBER = (
    r"(?:[a-z0-9][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
_BAGGAGE_TEXT = r"[\x20-\x7e]*"
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"


class TraceContext(NamedTuple):
    """A position in a trace: ``span_id`` is the span a child's work belongs to (None for a new
    trace's root, which has no span yet). ``flags`` are the W3C trace flags (``01``: sampled).
    ``state`` and ``baggage`` are carried unchanged."""

    trace_id: str
    span_id: str | None = None
    flags: str = "01"
    state: str | None = None
    baggage: str | None = None

    @property
    def sampled(self) -> bool:
        """Whether the trace's sampled flag is set."""
        return bool(int(self.flags, 16) & 1)

    def child(self) -> "TraceContext":
        """A new span in this trace (its id from ``os.urandom``), flags, state and baggage carried."""
        return self._replace(span_id=new_span_id())

    @property
    def traceparent(self) -> str | None:
        """The ``TRACEPARENT`` value naming this span (None when there is no span)."""
        if self.span_id is None:
            return None
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"

    def carrier(self) -> dict[str, str]:
        """The environment variables a child whose work is this span gets."""
        out: dict[str, str] = {}
        parent = self.traceparent
        if parent is not None:
            out[TRACEPARENT] = parent
            if self.state is not None:
                out[TRACESTATE] = self.state
        if self.baggage is not None:
            out[BAGGAGE] = self.baggage
        return out


def new_span_id() -> str:
    """Eight random bytes, never all zero (an all-zero span id is invalid)."""
    while True:
        span = os.urandom(8).hex()
        if span != _ZERO_SPAN:
            return span


def new_trace(*, sampled: bool = True, baggage: str | None = None) -> TraceContext:
    """The root of a new trace: a random trace id, no span yet."""
    while True:
        trace = os.urandom(16).hex()
        if trace != _ZERO_TRACE:
            return TraceContext(trace, None, "01" if sampled else "00", None, baggage)


def parse_traceparent(value: object) -> tuple[str, str, str] | None:
    """``(trace_id, parent_id, flags)`` of a valid W3C ``traceparent``, else None.

    Version ``00`` must be exactly 55 characters; a later version is read by its first four fields
    when more follow after a ``-`` (the W3C rule for versions this code does not know); ``ff`` and
    all-zero ids are invalid.
    """
    if not isinstance(value, str) or len(value) > 1024:
        return None
    match = re.fullmatch(_TRACEPARENT, value)
    if match is None:
        return None
    version, trace, span, flags, rest = match.groups()
    if version == "ff" or trace == _ZERO_TRACE or span == _ZERO_SPAN:
        return None
    if version == "00" and rest is not None:
        return None
    # Only the sampled bit is defined for version 00; the others are passed as 0.
    return trace, span, f"{int(flags, 16) & 1:02x}"


def valid_tracestate(value: object) -> str | None:
    """``value`` when it is a well-formed W3C ``tracestate`` of at most :data:`MAX_TRACESTATE`
    characters and 32 members, else None (an empty one is None too: there is nothing to carry)."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TRACESTATE:
        return None
    members = [m.strip(" \t") for m in value.split(",")]
    members = [m for m in members if m]
    if not members or len(members) > 32:
        return None
    keys = set()
    for member in members:
        if not re.fullmatch(_TRACESTATE_MEMBER, member):
            return None
        key = member.split("=", 1)[0]
        if key in keys:
            return None
        keys.add(key)
    return value


def valid_baggage(value: object) -> str | None:
    """``value`` when it is printable ASCII of at most :data:`MAX_BAGGAGE` characters with
    ``key=value`` members, else None. Members are not rewritten: baggage passes unchanged."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_BAGGAGE:
        return None
    if not re.fullmatch(_BAGGAGE_TEXT, value):
        return None
    for member in value.split(","):
        key, eq, _ = member.partition("=")
        if not eq or not re.fullmatch(_TOKEN, key.strip(" \t")):
            return None
    return value


def incoming(environ: Mapping[str, str]) -> TraceContext | None:
    """The context handed in by ``environ`` (a process's environment, a served client's; an MCP
    request's ``_meta`` with its keys upper-cased), or None when it carries no valid ``TRACEPARENT``
    and no baggage. Malformed values are dropped. Only the upper-case names are carriers, as the
    OpenTelemetry environment-carrier rules spell them: a ``traceparent`` in an environment is
    ambient (dropped from children like ``dsh_*``), never read as a context."""
    values = {name: environ.get(name) for name in CARRIER_NAMES}
    baggage = valid_baggage(values.get(BAGGAGE))
    parent = parse_traceparent(values.get(TRACEPARENT))
    if parent is None:
        return None if baggage is None else new_trace(baggage=baggage)
    trace, span, flags = parent
    return TraceContext(trace, span, flags, valid_tracestate(values.get(TRACESTATE)), baggage)


def start_run(environ: Mapping[str, str]) -> TraceContext:
    """The context of one run (a ``dsh run``, a ``dsh exec``, a served request): the incoming one
    continued, else a new trace."""
    return incoming(environ) or new_trace()


current_trace: ContextVar[TraceContext | None] = ContextVar("dsh_current_trace", default=None)
"""The span the work now running belongs to (set by the agent loop around each turn and tool call,
and by an embedder around a run): a hook process started now gets it as its ``TRACEPARENT``, and a
turn started now is its child. None outside any run."""
