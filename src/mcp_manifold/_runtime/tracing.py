"""OpenTelemetry tracing (`tracing: true`, the `otel` extra): one span per call through the gateway.

The SDK already does both ends of a hop: its server opens a span for each inbound request, continuing
the `traceparent` a client sent in `_meta`, and its client injects the current span into the `_meta`
of each request it sends. The gateway adds the span in between, around the call path's call
(`CallPath.around`), so one trace reads

    client -> gateway: tools/call git_status (SDK server span)
           -> gateway: tools/call git/status (this module: server, tool, surface, outcome)
           -> gateway: MCP send tools/call status (SDK client span; its traceparent goes to the server)
           -> server:  tools/call status

Without `tracing`, no hook is registered and the call path pays nothing; the SDK's spans are then
no-ops that still pass a client's `traceparent` on unchanged.

Export follows the standard variables: `OTEL_TRACES_EXPORTER` (`otlp`, the default, `console` or
`none`, comma-separated), `OTEL_EXPORTER_OTLP_ENDPOINT` / `_TRACES_ENDPOINT`, `_HEADERS`, `_TIMEOUT`,
`_PROTOCOL` (`http/protobuf`; `grpc` with `opentelemetry-exporter-otlp-proto-grpc` installed),
`OTEL_SERVICE_NAME` (default `mcp-manifold`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`,
`OTEL_TRACES_SAMPLER`, and `OTEL_SDK_DISABLED`. A tracer provider someone else installed first
(`opentelemetry-instrument`) is used as it is.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, StatusCode

from mcp_manifold._core.clients import Request
from mcp_manifold._core.router import Target
from mcp_manifold._errors import ManifoldError
from mcp_manifold._runtime.call_path import CallKind, CallRecord, Observer
from mcp_manifold._version import __version__

logger = logging.getLogger(__name__)

SERVICE_NAME = "mcp-manifold"
_METHODS: dict[str, str] = {
    "tool": "tools/call",
    "resource": "resources/read",
    "prompt": "prompts/get",
    "completion": "completion/complete",
    "program": "code/execute",
    "action": "tools/call",  # a surface's own tool, answered by the gateway
}


class CallTracer:
    """The call path's around-call hook: a span per call, current while the backend is asked."""

    def __init__(self, tracer_provider: Any | None = None) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("mcp-manifold", __version__)

    @contextmanager
    def __call__(self, kind: CallKind, request: Request, target: Target) -> Iterator[Observer]:
        method = _METHODS[kind]
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            "manifold.server": target.server,
            "manifold.surface": target.surface,
            "manifold.exposed_name": target.exposed,
        }
        if kind == "tool":
            attributes |= {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": target.name}
        elif kind == "prompt":
            attributes["gen_ai.prompt.name"] = target.name
        elif kind == "resource":
            attributes["mcp.resource.uri"] = target.name
        with self._tracer.start_as_current_span(
            _span_name(kind, method, target),
            kind=SpanKind.INTERNAL,
            context=_parent(request.meta),
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:

            def finish(record: CallRecord) -> None:
                span.set_attribute("manifold.outcome", record.outcome)
                if record.backend is not None:
                    span.set_attribute("manifold.backend_seconds", record.backend)
                if record.spilled:
                    span.set_attribute("manifold.spilled", True)
                if record.outcome == "error":
                    span.set_attribute("error.type", "backend_error" if record.error else "tool_error")
                    span.set_status(StatusCode.ERROR, record.error)

            yield finish


def _span_name(kind: CallKind, method: str, target: Target) -> str:
    """`tools/call git/status`: the method and what it names, when that is one of a listing's names. A
    resource's URI is the caller's to choose (a template's), so it is left out, as the MCP semantic
    conventions say: one span name per URI asked for, and whatever a URI carries, in every trace view."""
    if kind == "resource":
        return f"{method} {target.server}" if target.server else method
    return f"{method} {target.server}/{target.name}" if target.server else f"{method} {target.name}"


def _parent(meta: Mapping[str, Any] | None) -> Context | None:
    """The client's trace from `_meta` when no span is current (a call that did not come through the SDK
    server, which continues it itself); None nests the span under the current one."""
    if trace.get_current_span().get_span_context().is_valid or not meta or "traceparent" not in meta:
        return None
    context = propagate.extract(meta)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def start_tracing() -> Any | None:
    """Install a tracer provider exporting as the `OTEL_*` variables say; returns it (to shut down at
    exit), or None when one was installed already or `OTEL_SDK_DISABLED` is true."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        logger.info("tracing: OTEL_SDK_DISABLED is true, no spans are exported")
        return None
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return None  # set up by whoever started us (opentelemetry-instrument): theirs is the one to use
    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for exporter in _exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _exporters() -> list[Any]:
    names = [name.strip().lower() for name in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    exporters: list[Any] = []
    for name in filter(None, names):
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter())
        elif name == "otlp":
            exporters.append(_otlp_exporter())
        else:
            raise ManifoldError(f"tracing: OTEL_TRACES_EXPORTER {name!r} is not supported; use otlp, console or none")
    return exporters


def _otlp_exporter() -> Any:
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    ).strip() or "http/protobuf"
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter as GrpcSpanExporter,
            )
        except ImportError:
            raise ManifoldError(
                "tracing: OTLP over grpc needs pip install opentelemetry-exporter-otlp-proto-grpc "
                "(or set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)"
            ) from None
        return GrpcSpanExporter()
    raise ManifoldError(f"tracing: OTLP protocol {protocol!r} is not supported; use http/protobuf or grpc")
