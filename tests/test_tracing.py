"""Tracing: one trace from the client through the gateway to the server.

`manifold serve --http --tracing` runs as a subprocess and exports over OTLP/HTTP to a receiver in this
test (configured only by the standard OTEL_* variables). The client's span is recorded by an
OpenTelemetry SDK tracer of this test (in memory, never installed globally); the SDK client sends its
`traceparent`; the fixture server answers with the `_meta` it received, so the last hop shows too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.conftest import free_port, server_entry, stop_process, wait_for_port

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

pytestmark = pytest.mark.anyio


class Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: keeps every span it is sent."""

    spans: list[Any]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = trace_service.ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
            )
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend((service, span) for span in scope_spans.spans)
        reply = trace_service.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[Any]]]:
    received: list[Any] = []
    handler = type("Handler", (Collector,), {"spans": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def attributes(span: Any) -> dict[str, Any]:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


async def test_one_trace_goes_from_the_client_through_the_gateway_to_the_server(
    tmp_path: Path, collector: tuple[str, list[Any]]
) -> None:
    endpoint, received = collector
    config = tmp_path / "mcp.json"
    kitchen = server_entry("kitchen.py", env={"KITCHEN_EXTRAS": "1"})
    manifold = {"data_dir": str(tmp_path / "data"), "ping_interval": 0, "tracing": True}
    config.write_text(json.dumps({"mcpServers": {"kitchen": kitchen}, "manifold": manifold}))
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": "gateway-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    port = free_port()
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(command, env=env, start_new_session=True)

    exporter = InMemorySpanExporter()
    provider = otel_sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("the client")
    try:
        wait_for_port(port, process)
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            with tracer.start_as_current_span("client asks for its meta"):
                answered = await client.call_tool("kitchen_request_meta", {})
            with tracer.start_as_current_span("client makes a call fail"):
                failed = await client.call_tool("kitchen_fail", {"message": "on purpose"})
            # A template's URI is the caller's to make up: it is an attribute, never the span's name.
            await client.read_resource("kitchen+kitchen://greeting/made-up-by-the-caller")
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="auto") as modern:
            assert modern.protocol_version == "2026-07-28"
            with tracer.start_as_current_span("a 2026-07-28 client calls"):
                echoed = await modern.call_tool("kitchen_echo", {"text": "no session"})
        assert failed.is_error and not echoed.is_error
        with anyio.fail_after(20):
            while (
                sum(
                    1
                    for _service, span in received
                    if span.name.startswith(("tools/call kitchen/", "resources/read k"))
                )
                < 4
            ):
                await anyio.sleep(0.05)
    finally:
        stop_process(process)

    client_span, failing_span, modern_span = exporter.get_finished_spans()
    trace_id = client_span.context.trace_id
    spans = {span.name: span for service, span in received if service == "gateway-under-test"}
    # client -> the gateway's server span (the SDK continues the client's traceparent)
    inbound = spans["tools/call kitchen_request_meta"]
    assert int.from_bytes(inbound.trace_id, "big") == trace_id
    assert int.from_bytes(inbound.parent_span_id, "big") == client_span.context.span_id
    # -> the gateway's call span, with server, tool, surface and outcome
    call = spans["tools/call kitchen/request_meta"]
    assert call.parent_span_id == inbound.span_id and call.trace_id == inbound.trace_id
    assert (
        attributes(call).items()
        >= {
            "manifold.server": "kitchen",
            "gen_ai.tool.name": "request_meta",
            "manifold.surface": "direct",
            "manifold.outcome": "ok",
        }.items()
    )
    # -> the request to the server, whose traceparent names the gateway's client span as parent
    outbound = spans["MCP send tools/call request_meta"]
    assert outbound.parent_span_id == call.span_id
    sent = json.loads(answered.content[0].text)["traceparent"]  # type: ignore[union-attr]
    _version, sent_trace, sent_parent, _flags = sent.split("-")
    assert int(sent_trace, 16) == trace_id
    assert bytes.fromhex(sent_parent) == outbound.span_id

    failure = spans["tools/call kitchen/fail"]
    assert int.from_bytes(failure.trace_id, "big") == failing_span.context.trace_id
    assert attributes(failure)["manifold.outcome"] == "error"
    assert failure.status.code == failure.status.STATUS_CODE_ERROR

    read = spans["resources/read kitchen"]  # was "resources/read kitchen/kitchen://greeting/made-up-by-the-caller"
    assert attributes(read)["mcp.resource.uri"] == "kitchen://greeting/made-up-by-the-caller"
    assert not [name for name in spans if "made-up" in name]

    # A 2026-07-28 client's request stands alone, and its trace runs through the gateway the same way.
    inbound = spans["tools/call kitchen_echo"]
    assert int.from_bytes(inbound.trace_id, "big") == modern_span.context.trace_id
    assert int.from_bytes(inbound.parent_span_id, "big") == modern_span.context.span_id
    call = spans["tools/call kitchen/echo"]
    assert call.parent_span_id == inbound.span_id and attributes(call)["manifold.outcome"] == "ok"
    assert spans["MCP send tools/call echo"].parent_span_id == call.span_id
