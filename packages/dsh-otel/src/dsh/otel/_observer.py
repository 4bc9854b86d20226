"""The observer that turns the loop's spans into OpenTelemetry SDK spans, exported over OTLP/HTTP.

dsh chooses every span id itself (``os.urandom``, :mod:`dsh.session.trace`): the ``TRACEPARENT`` a
command gets names its call's span before any observer runs. The SDK is handed those ids through
its public :class:`IdGenerator` seam: just before each ``start_span`` the generator is told the ids
the span must get, under a lock, so the exported span is the one the child was told about.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from dsh.agent import Span
from dsh.paths.log import adopt

_KINDS = {"turn": SpanKind.INTERNAL, "tool": SpanKind.INTERNAL, "model": SpanKind.CLIENT}


class _ChosenIds(IdGenerator):
    """Hands the SDK the ids dsh chose for the span being started (see the module docstring)."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


class _Counted(SpanExporter):
    """The OTLP exporter, counting the spans it could not deliver, so dsh says so in one line at exit
    instead of the SDK's retry messages (which follow the ``dsh`` command's log choice, as psycopg's do)."""

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self._inner = inner
        self.endpoint = endpoint
        self.lost = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.lost += len(spans)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class SpanExporterObserver:
    """A :class:`dsh.agent.Observer` exporting each span through a ``BatchSpanProcessor``."""

    def __init__(self, provider: TracerProvider, ids: _ChosenIds, exporter: _Counted | None = None) -> None:
        self._provider = provider
        self._exporter = exporter
        self._ids = ids
        self._tracer = provider.get_tracer("dsh.otel")
        self._lock = threading.Lock()
        self._open: dict[str, trace.Span] = {}

    @classmethod
    def from_environment(cls, endpoint: str) -> SpanExporterObserver:
        """The exporter the ``OTEL_EXPORTER_OTLP_*`` variables describe (endpoint, headers, timeout),
        the resource of ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (``service.name`` ``dsh``
        by default), and the sampler of ``OTEL_TRACES_SAMPLER`` (parent-based, always on, by default).
        ``endpoint`` is where the variables send spans, as a failure to deliver them names it."""
        ids = _ChosenIds()
        resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, the SDK's defaults
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: "dsh"}))  # the SDK's placeholder: name it
        # The interpreter's exit flushes as well (the SDK's own atexit hook); dsh's unload comes first.
        provider = TracerProvider(resource=resource, id_generator=ids)
        adopt("opentelemetry")
        exporter = _Counted(OTLPSpanExporter(), endpoint)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider, ids, exporter)

    def started(self, span: Span) -> None:
        """Start the SDK span with ``span``'s ids, its parent remote when it is not one of ours."""
        context = span.context
        parent_context = None
        if span.parent_id is not None:
            parent = self._open.get(span.parent_id)
            if parent is None:  # handed in from outside (TRACEPARENT), or the parent is not observed
                state = TraceState.from_header([context.state]) if context.state else None
                parent = NonRecordingSpan(
                    SpanContext(
                        int(context.trace_id, 16),
                        int(span.parent_id, 16),
                        is_remote=True,
                        trace_flags=TraceFlags(int(context.flags, 16)),
                        trace_state=state,
                    )
                )
            parent_context = trace.set_span_in_context(parent)
        assert context.span_id is not None
        with self._lock:
            self._ids.trace_id, self._ids.span_id = int(context.trace_id, 16), int(context.span_id, 16)
            started = self._tracer.start_span(
                span.name,
                context=parent_context,
                kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
                attributes=_attributes(span.attributes),
                start_time=span.start_ns,
            )
            self._open[context.span_id] = started

    def ended(self, span: Span) -> None:
        """End the SDK span: final attributes, an error status when the work failed, the end time."""
        assert span.context.span_id is not None
        with self._lock:
            started = self._open.pop(span.context.span_id, None)
        if started is None:
            return
        attributes = _attributes(span.attributes)
        if span.error is not None:  # it raised or was interrupted
            attributes.setdefault("error.type", span.error.split(":")[0])
        failed = attributes.get("error.type")  # or it ended as a failed call (blocked, the tool's error)
        if failed is not None:
            started.set_status(Status(StatusCode.ERROR, span.error or str(failed)))
        started.set_attributes(attributes)
        started.end(end_time=span.end_ns)

    def shutdown(self) -> None:
        """End spans still open (as interrupted), then flush every ended span and stop the exporter."""
        with self._lock:
            still = list(self._open.values())
            self._open.clear()
        for started in still:
            started.set_status(Status(StatusCode.ERROR, "dsh stopped before the work ended"))
            started.end()
        self._provider.shutdown()
        exporter = self._exporter
        if exporter is not None and exporter.lost:
            # The one line a user who asked for spans gets when they did not arrive (the SDK's own
            # retry messages show with ``dsh --debug``).
            print(
                f"dsh: warning: dsh-otel could not deliver {exporter.lost} span(s) to {exporter.endpoint}; "
                "check that a collector listens there (OTEL_EXPORTER_OTLP_ENDPOINT), or unset "
                "OTEL_TRACES_EXPORTER to export nothing",
                file=sys.stderr,
            )


def _attributes(values: dict[str, Any]) -> dict[str, Any]:
    """The attributes OpenTelemetry accepts (strings, booleans, numbers); others as their text."""
    return {k: v if isinstance(v, str | bool | int | float) else str(v) for k, v in values.items() if v is not None}
