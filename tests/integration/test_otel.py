"""dsh-otel end to end: a real ``dsh`` exporting through OpenTelemetry's own SDK (unpatched) to an
OTLP/HTTP collector served on loopback by this test, which decodes the protobuf with
``opentelemetry-proto`` and checks span names, parents and attributes against what the children saw.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

pytestmark = pytest.mark.integration

INCOMING = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PROBE = 'echo "$DSH_SESSION_ID|$DSH_TOOL_CALL_ID|$TRACEPARENT"'


class Collector:
    """An OTLP/HTTP trace receiver on 127.0.0.1: every span it was sent, decoded."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector._take(self.path, request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _take(self, path: str, request: ExportTraceServiceRequest) -> None:
        assert path == "/v1/traces"
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_id": span.parent_span_id.hex() or None,
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                                "status": span.status.code,
                                "status_message": span.status.message,
                                "duration_ns": span.end_time_unix_nano - span.start_time_unix_nano,
                                "resource": resource,
                            }
                        )

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [s for s in self.spans if s["name"] == name]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@pytest.fixture
def collector() -> Iterator[Collector]:
    served = Collector()
    try:
        yield served
    finally:
        served.close()


def _env(home: Path, collector: Collector | None, **extra: str) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k.upper() not in {"TRACEPARENT", "TRACESTATE", "BAGGAGE"} and not k.startswith("OTEL_")
    }
    env = {**base, "DSH_HOME": str(home), **extra}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if collector is not None:
        env.update(
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
            OTEL_SERVICE_NAME="dsh-under-test",
        )
    return env


def _dsh(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh.cli", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_scripted_run_exports_turns_model_requests_and_tool_calls_in_the_handed_trace(
    tmp_path: Path, collector: Collector
) -> None:
    script = tmp_path / "script.json"
    bash = {"name": "bash", "arguments": {"command": PROBE}}
    spawn = {"name": "spawn_agent", "arguments": {"agent_type": "helper", "prompt": "p"}}
    script.write_text(
        json.dumps(
            {
                "turns": [{"user": "go", "steps": [{"tool_calls": [bash, spawn]}, {"text": "done"}]}],
                "subagents": {"helper": [{"tool_calls": [bash]}, {"text": "child done"}]},
            }
        )
    )
    env = _env(tmp_path / "home", collector, TRACEPARENT=INCOMING)
    run = _dsh("run", "--script", str(script), "--json", env=env)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    session = out["session_id"]
    child_session, call_id, traceparent = (
        out["turns"][0]["tool_calls"][0]["output"].split("[exit")[0].strip().split("|")
    )
    assert child_session == session

    # Flushed before dsh exited: everything is here already.
    assert all(s["trace_id"] == TRACE_ID for s in collector.spans)
    by_id = {s["span_id"]: s for s in collector.spans}
    turns = collector.named("invoke_agent")
    main_turn = next(t for t in turns if t["attributes"]["gen_ai.conversation.id"] == session)
    assert main_turn["parent_id"] == "b7ad6b7169203331"  # the span dsh was handed
    assert main_turn["resource"]["service.name"] == "dsh-under-test"
    tools = collector.named("execute_tool bash")
    assert len(tools) == 2
    mine = next(t for t in tools if t["attributes"]["gen_ai.tool.call.id"] == call_id)
    # The child's TRACEPARENT names its execute_tool span, a child of its turn.
    assert traceparent == f"00-{TRACE_ID}-{mine['span_id']}-01"
    assert mine["parent_id"] == main_turn["span_id"]
    assert mine["attributes"]["gen_ai.tool.name"] == "bash"
    assert mine["attributes"]["gen_ai.conversation.id"] == session
    assert mine["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert mine["attributes"]["process.exit.code"] == 0
    assert mine["duration_ns"] > 0 and mine["status"] != 2
    chats = [c for c in collector.named("chat") if c["parent_id"] == main_turn["span_id"]]
    assert len(chats) == 2 and all(c["attributes"]["gen_ai.request.model"] for c in chats)

    # The subagent: its turn is a child of the spawn call's span; its own call in its own session.
    spawn_span = collector.named("execute_tool spawn_agent")[0]
    assert spawn_span["parent_id"] == main_turn["span_id"]
    sub_turn = next(t for t in turns if t["parent_id"] == spawn_span["span_id"])
    assert sub_turn["attributes"]["gen_ai.conversation.id"] != session
    assert sub_turn["attributes"]["dsh.agent.depth"] == 1
    sub_tool = next(t for t in tools if t is not mine)
    assert by_id[sub_tool["parent_id"]] is sub_turn
    assert sub_tool["attributes"]["gen_ai.agent.id"] == sub_turn["attributes"]["gen_ai.conversation.id"]


def test_a_timed_out_and_an_interrupted_exec_still_export_their_spans(tmp_path: Path, collector: Collector) -> None:
    env = _env(tmp_path / "home", collector)
    timed = _dsh("exec", "--no-server", "--timeout", "1", "--", "sleep 30", env=env)
    assert timed.returncode == 124, timed.stderr
    (tool,) = collector.named("execute_tool bash")
    assert tool["attributes"]["dsh.timed_out"] is True
    (turn,) = collector.named("invoke_agent")
    assert tool["parent_id"] == turn["span_id"] and turn["parent_id"] is None

    began = tmp_path / "began"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh.cli", "exec", "--no-server", "--", f"touch {began}; sleep 30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not began.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    interrupted = [t for t in collector.named("execute_tool bash") if t is not tool]
    assert len(interrupted) == 1 and interrupted[0]["status"] == 2  # STATUS_CODE_ERROR
    assert interrupted[0]["status_message"] == "SIGINT"
    assert len(collector.named("invoke_agent")) == 2


def test_disabled_or_unset_imports_no_opentelemetry_and_sends_nothing(tmp_path: Path, collector: Collector) -> None:
    for env in (
        _env(tmp_path / "home", collector, OTEL_SDK_DISABLED="true"),
        _env(tmp_path / "home", None),
    ):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "dsh.cli", "exec", "--no-server", "--", "true"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        imported = [line for line in done.stderr.splitlines() if "opentelemetry" in line]
        assert imported == []
    time.sleep(0.2)
    assert collector.requests == 0


def test_a_collector_that_is_not_there_is_one_warning_line_and_the_command_still_runs(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = _env(tmp_path / "home", None, OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_TIMEOUT="1")
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    done = _dsh("exec", "--no-server", "--", "echo ran", env=env)
    assert (done.returncode, done.stdout) == (0, "ran\n")
    lines = [line for line in done.stderr.splitlines() if "Cryptography" not in line and line.startswith("dsh")]
    assert lines == [
        f"dsh: warning: dsh-otel could not deliver 2 span(s) to http://127.0.0.1:{port}; check that a collector "
        "listens there (OTEL_EXPORTER_OTLP_ENDPOINT), or unset OTEL_TRACES_EXPORTER to export nothing"
    ]
    assert "Transient error" not in done.stderr  # the SDK's retry messages follow the command's log choice
