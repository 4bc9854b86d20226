"""dsh-otel on its own: which variables turn it on, the spans it hands the SDK (the SDK's own
in-memory exporter records them), and that unloading the plugin removes its observer and flushes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from dsh.agent import OBSERVERS, Observers, Span
from dsh.core import Context, FiberState
from dsh.otel import SettingsError, plugin, settings
from dsh.otel._observer import SpanExporterObserver, _ChosenIds
from dsh.session.trace import TraceContext

TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize(
    ("environ", "enabled"),
    [
        ({}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_TRACES_EXPORTER": "console"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, True),
    ],
)
def test_the_standard_variables_decide(environ: dict[str, str], enabled: bool) -> None:
    assert settings(environ).enabled is enabled


def test_a_protocol_it_cannot_speak_is_one_sentence_naming_the_variable_and_the_fix() -> None:
    with pytest.raises(SettingsError, match=r"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc is not supported.*http/protobuf"):
        settings({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"})


def _observer() -> tuple[SpanExporterObserver, InMemorySpanExporter]:
    exported = InMemorySpanExporter()
    ids = _ChosenIds()
    provider = TracerProvider(id_generator=ids)
    provider.add_span_processor(SimpleSpanProcessor(exported))
    return SpanExporterObserver(provider, ids), exported


def test_spans_carry_the_ids_dsh_chose_and_their_parents() -> None:
    observer, exported = _observer()
    handed = TraceContext(TRACE, "b7ad6b7169203331", "01", "vendor=abc")
    turn_ctx = handed.child()
    turn = Span("turn", "invoke_agent", turn_ctx, handed.span_id, {"gen_ai.conversation.id": "s-1"})
    tool = Span("tool", "execute_tool bash", turn_ctx.child(), turn_ctx.span_id, {"gen_ai.tool.call.id": "c1"})
    observer.started(turn)
    observer.started(tool)
    tool.end_ns, tool.error = tool.start_ns + 1000, "SIGINT"
    observer.ended(tool)
    turn.end_ns = turn.start_ns + 2000
    observer.ended(turn)
    got_tool, got_turn = exported.get_finished_spans()
    assert f"{got_turn.context.trace_id:032x}" == TRACE
    assert f"{got_turn.context.span_id:016x}" == turn_ctx.span_id
    assert got_turn.parent is not None and f"{got_turn.parent.span_id:016x}" == "b7ad6b7169203331"
    assert got_turn.parent.is_remote and got_turn.parent.trace_state.get("vendor") == "abc"
    assert f"{got_tool.context.span_id:016x}" == tool.context.span_id
    assert got_tool.parent is not None and got_tool.parent.span_id == got_turn.context.span_id
    assert not got_tool.parent.is_remote
    assert got_tool.status.status_code is StatusCode.ERROR and got_tool.status.description == "SIGINT"
    assert got_tool.attributes is not None and got_tool.attributes["error.type"] == "SIGINT"
    assert got_tool.end_time is not None and got_tool.start_time is not None
    assert got_tool.end_time - got_tool.start_time == 1000


def test_shutdown_ends_what_is_still_open_as_an_error_and_exports_it() -> None:
    observer, exported = _observer()
    root = TraceContext(TRACE).child()
    observer.started(Span("turn", "invoke_agent", root, None, {}))
    observer.shutdown()
    (span,) = exported.get_finished_spans()
    assert span.parent is None and span.status.status_code is StatusCode.ERROR


def test_unloading_the_plugin_removes_its_observer_and_shuts_the_exporter_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # nothing is sent: no span
    root = Context.root()
    observers = Observers()
    root.provide(OBSERVERS, observers)
    fiber = root.plugin(plugin)
    assert fiber.state is FiberState.ACTIVE and len(observers.active) == 1
    fiber.dispose()
    assert observers.active == ()


def test_a_bad_protocol_fails_the_plugin_loudly_and_registers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    root = Context.root()
    observers = Observers()
    root.provide(OBSERVERS, observers)
    fiber = root.plugin(plugin)
    assert fiber.state is FiberState.FAILED and "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in (fiber.error or "")
    assert observers.active == ()


def test_disabled_it_imports_nothing_of_opentelemetry() -> None:
    code = textwrap.dedent(
        """
        import sys
        from dsh.agent import OBSERVERS, Observers
        from dsh.core import Context
        from dsh.otel import plugin
        root = Context.root()
        root.provide(OBSERVERS, Observers())
        fiber = root.plugin(plugin)
        print(fiber.state.name, sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    for extra in ({}, {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}):
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | extra
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        assert done.stdout.split(" ", 1) == ["ACTIVE", "[]\n"]
