"""Prometheus metrics of one gateway, in a registry of its own (the HTTP front serves it at /metrics).

Two kinds of numbers:

- counted as calls happen, by an observer of the call path and of searches: calls by server, tool
  and outcome, latency histograms (the whole call path, the backend's part, and what the gateway
  added), spilled results, search latency;
- read when Prometheus scrapes (`_GatewayState`): each backend's state, health, restarts, breaker,
  tool count and protocol version; clients by protocol era; catalog and search index size; spill
  bytes; reloads.

Cardinality is bounded by design: a tool label is the tool's name on its server, never a name a
client made up (its refusal, recorded when profiles or limits are on, counts as tool `_other` with no
server: else any caller could take up every label and make each real tool `_other`), and once
`TOOL_LABELS` distinct (server, tool) pairs have been seen, any further tool counts as `_other`; server
labels are bounded the same way (`SERVER_LABELS`, for hub instances that come and go; one registered under a
generated id gives its label and series back once it is gone for good). Latency histograms have no tool
label at all. Resource reads carry no URI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mcp_manifold._core.bounded import BoundedTable
from mcp_manifold._core.breaker import BreakerState
from mcp_manifold._core.health import HealthState
from mcp_manifold._core.status import State
from mcp_manifold._runtime.call_path import CallKind, CallRecord, Outcome
from mcp_manifold._version import __version__

if TYPE_CHECKING:
    from mcp_manifold._runtime.gateway import Gateway

TOOL_LABELS = 500
SERVER_LABELS = 100
_SERIES_CACHED = 4096  # tool calls' series kept at hand, by server, tool, outcome and whether it reached its server
OTHER = "_other"
# Seconds: from a cached answer (well under a millisecond) to a long tool call.
CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
GATEWAY_BUCKETS = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05)
SEARCH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class BoundedLabels:
    """Label values as they are first seen, up to `limit` distinct ones; after that, `OTHER`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[Any] = set()

    def admit(self, value: Any) -> bool:
        if value in self._seen:
            return True
        if len(self._seen) >= self.limit:
            return False
        self._seen.add(value)
        return True

    def release(self, belongs: Callable[[Any], bool]) -> list[Any]:
        """Give back the labels `belongs` picks (their series were removed); returns them."""
        released = [value for value in self._seen if belongs(value)]
        self._seen.difference_update(released)
        return released


class GatewayMetrics:
    """The metrics of one gateway; `attach()` starts counting, `registry` is what /metrics serves."""

    def __init__(self, gateway: Gateway, http_lane: Callable[[], dict[str, int]] | None = None) -> None:
        """`http_lane`, over HTTP: the `tools/call` requests answered so far by each path (lane, sdk)."""
        self.gateway = gateway
        self.registry = CollectorRegistry()
        registry = self.registry
        self.tool_calls = Counter(
            "manifold_tool_calls", "Tool calls through the gateway.", ["server", "tool", "outcome"], registry=registry
        )
        self.reads = Counter(
            "manifold_reads",
            "Resource reads, prompt gets and completions through the gateway.",
            ["server", "kind", "outcome"],
            registry=registry,
        )
        self.programs = Counter(
            "manifold_code_programs",
            "Code-mode programs run (their calls count as tool calls).",
            ["outcome"],
            registry=registry,
        )
        self.actions = Counter(
            "manifold_actions",
            "Work the gateway did itself for callers: surfaces' lists, searches and result-file reads.",
            ["surface", "action", "outcome"],
            registry=registry,
        )
        self.call_seconds = Histogram(
            "manifold_call_duration_seconds",
            "Seconds a call spent in the gateway's call path, the backend's answer included.",
            ["server", "kind"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self.backend_seconds = Histogram(
            "manifold_backend_duration_seconds",
            "Seconds a call waited for its backend (a start and the concurrency queue included).",
            ["server", "kind"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self.gateway_seconds = Histogram(
            "manifold_gateway_added_seconds",
            "Seconds the call path added to a backend call (cache, breaker, spill, scrubbing).",
            ["kind"],
            buckets=GATEWAY_BUCKETS,
            registry=registry,
        )
        self.spilled = Counter(
            "manifold_spilled_results", "Tool results written to a spill file.", ["server"], registry=registry
        )
        self.search_seconds = Histogram(
            "manifold_search_duration_seconds",
            "Seconds a tool search took (retrieve_tools, dispatch search, the dashboard).",
            buckets=SEARCH_BUCKETS,
            registry=registry,
        )
        registry.register(_GatewayState(gateway, http_lane))
        ProcessCollector(registry=registry)
        self._tools = BoundedLabels(TOOL_LABELS)
        self._servers = BoundedLabels(SERVER_LABELS)
        self._tool_series: BoundedTable[tuple[str, str, str, bool], _ToolSeries] = BoundedTable(_SERIES_CACHED)
        self._detach: list[Callable[[], None]] = []

    def attach(self) -> Callable[[], None]:
        """Start counting calls and searches; returns a function that stops it."""
        self._detach.append(self.gateway.calls.observe(self.observe_call))
        self.gateway.search_observers.append(self.search_seconds.observe)
        self._detach.append(lambda: self.gateway.search_observers.remove(self.search_seconds.observe))
        self.gateway.forget_observers.append(self.forget_server)
        self._detach.append(lambda: self.gateway.forget_observers.remove(self.forget_server))

        def detach() -> None:
            for stop in self._detach:
                stop()
            self._detach.clear()

        return detach

    def forget_server(self, server: str) -> None:
        """Remove a server's series and give back its labels: a hub instance gone for good (a generated id) would
        otherwise keep both until restart, and past `SERVER_LABELS` such ones every new instance is `_other`."""
        if not self._servers.release(lambda seen: seen == server):
            return  # it never had a label of its own (its calls count as `_other`, which stays)
        tools = [tool for _server, tool in self._tools.release(lambda seen: seen[0] == server)]
        for key in [key for key in self._tool_series if key[0] == server]:
            del self._tool_series[key]
        outcomes, kinds = get_args(Outcome), get_args(CallKind)
        for tool in [*tools, OTHER]:
            for outcome in outcomes:
                self.tool_calls.remove(server, tool, outcome)
        for kind in kinds:
            self.call_seconds.remove(server, kind)
            self.backend_seconds.remove(server, kind)
            for outcome in outcomes:
                self.reads.remove(server, kind, outcome)
        self.spilled.remove(server)

    def _server(self, server: str) -> str:
        return server if self._servers.admit(server) else OTHER

    def observe_call(self, record: CallRecord) -> None:
        if record.kind == "program":
            self.programs.labels(record.outcome).inc()
            self.call_seconds.labels("", "program").observe(record.duration)
            return
        if record.kind == "tool":
            self._observe_tool(record)
            return
        server = self._server(record.target.server)
        if record.kind == "action":  # a fixed set of names per surface: bounded labels
            self.actions.labels(record.target.surface, record.target.name, record.outcome).inc()
        else:
            self.reads.labels(server, record.kind, record.outcome).inc()
        self.call_seconds.labels(server, record.kind).observe(record.duration)
        if record.backend is not None:
            self.backend_seconds.labels(server, record.kind).observe(record.backend)
            self.gateway_seconds.labels(record.kind).observe(max(0.0, record.duration - record.backend))

    def _observe_tool(self, record: CallRecord) -> None:
        # The series a tool call counts in, looked up once per (server, tool, outcome, timed) rather than by
        # label values (validated and locked) four times per call.
        target = record.target
        timed = record.backend is not None  # a refused or cached call has no backend part: no series for it
        key = (target.server, target.name, record.outcome, timed)
        series = self._tool_series.get(key)
        if series is None:
            server = self._server(target.server)
            # No server: a name nothing has, which the caller chose; it never takes a label of its own.
            known = bool(target.server) and self._tools.admit((server, target.name))
            tool = target.name if known else OTHER
            series = _ToolSeries(
                server,
                self.tool_calls.labels(server, tool, record.outcome),
                self.call_seconds.labels(server, "tool"),
                self.backend_seconds.labels(server, "tool") if timed else None,
                self.gateway_seconds.labels("tool") if timed else None,
            )
            self._tool_series.keep(key, series)  # servers come and go (hub instances): bounded
        series.calls.inc()
        if record.spilled:
            self.spilled.labels(series.server).inc()
        series.duration.observe(record.duration)
        if record.backend is not None and series.backend is not None and series.added is not None:
            series.backend.observe(record.backend)
            series.added.observe(max(0.0, record.duration - record.backend))


@dataclass(frozen=True, slots=True)
class _ToolSeries:
    server: str  # the label: the server's name, or OTHER
    calls: Any
    duration: Any
    backend: Any | None  # with the next one, only for calls that reached their backend
    added: Any | None


class _GatewayState(Collector):
    """What the gateway is like right now, read at each scrape (nothing is counted per call)."""

    def __init__(self, gateway: Gateway, http_lane: Callable[[], dict[str, int]] | None = None) -> None:
        self.gateway = gateway
        self.http_lane = http_lane

    def collect(self) -> Iterator[Metric]:
        gateway = self.gateway
        if self.http_lane is not None:
            paths = CounterMetricFamily(
                "manifold_http_tool_calls",
                "tools/call requests over HTTP by the path that answered them: the fast lane, or the SDK's server.",
                labels=["path"],
            )
            for path, count in self.http_lane().items():
                paths.add_metric([path], count)
            yield paths
        backends = gateway.pool.all_backends()
        info = GaugeMetricFamily("manifold_info", "The gateway's version.", labels=["version"])
        info.add_metric([__version__], 1)
        yield info
        uptime = GaugeMetricFamily("manifold_uptime_seconds", "Seconds since the gateway started.")
        uptime.add_metric([], time.time() - gateway.started_at)
        yield uptime
        yield _enum(
            "manifold_backend_state",
            "1 for each server's current state.",
            get_args(State),
            ((backend.name, backend.state) for backend in backends),
        )
        health = gateway.health.health
        yield _enum(
            "manifold_backend_health",
            "1 for each watched server's health (pings and reconnects).",
            get_args(HealthState),
            ((name, record.state) for name, record in health.items()),
        )
        yield _enum(
            "manifold_backend_breaker_state",
            "1 for each server's circuit breaker state.",
            get_args(BreakerState),
            ((backend.name, backend.breaker.state) for backend in backends),
        )
        restarts = CounterMetricFamily(
            "manifold_backend_restarts", "Times a server was started again after failing.", labels=["server"]
        )
        failures = GaugeMetricFamily(
            "manifold_backend_consecutive_failures", "Failures in a row counted by the breaker.", labels=["server"]
        )
        tools = GaugeMetricFamily("manifold_backend_tools", "Tools each server lists.", labels=["server"])
        login = GaugeMetricFamily(
            "manifold_backend_needs_login",
            "1 for a running OAuth server whose tokens stopped working: each call is refused until "
            "`manifold auth login NAME` (its state stays ready).",
            labels=["server"],
        )
        raw = CounterMetricFamily(
            "manifold_backend_raw_leg_calls",
            "tools/call requests sent to each server on a raw leg, around the SDK's client; other requests "
            "to it took the SDK's path.",
            labels=["server"],
        )
        clients = GaugeMetricFamily(
            "manifold_backend_raw_leg_clients",
            "HTTP clients the raw leg of each HTTP server's session sends on: one, and more (each a pool of its "
            "own) while many calls are in flight.",
            labels=["server"],
        )
        for backend in backends:
            restarts.add_metric([backend.name], backend.restarts)
            failures.add_metric([backend.name], backend.breaker.failures)
            tools.add_metric([backend.name], backend.tool_count)
            login.add_metric([backend.name], int(backend.needs_login))
            raw.add_metric([backend.name], backend.raw_leg_calls)
            if (leg_clients := backend.raw_leg_clients) is not None:
                clients.add_metric([backend.name], leg_clients)
        yield from (restarts, failures, tools, login, raw, clients)
        protocol = GaugeMetricFamily(
            "manifold_backend_protocol",
            "1 for the protocol version each running server speaks.",
            labels=["server", "version"],
        )
        for backend in backends:
            version = backend.status().protocol
            if version is not None:
                protocol.add_metric([backend.name, version], 1)
        yield protocol

        # A session-era client is connected while its session is open; a 2026-07-28 client has no session,
        # and holds a connection only while it listens for changes (`subscriptions/listen`).
        channel = gateway.back_channel
        sessions = GaugeMetricFamily(
            "manifold_sessions",
            "Clients connected now by protocol era: session-era sessions, and 2026-07-28 listen streams.",
            labels=["era"],
        )
        sessions.add_metric(["session"], channel.session_count())
        sessions.add_metric(["stateless"], channel.listen_streams)
        yield sessions
        stateless = CounterMetricFamily(
            "manifold_stateless_requests", "Requests of 2026-07-28 clients (each stands alone, with no session)."
        )
        stateless.add_metric([], gateway.stateless_requests)
        yield stateless

        catalog = GaugeMetricFamily("manifold_catalog_tools", "Tools in the merged catalog.")
        catalog.add_metric([], len(gateway.catalog.tool_entries()))
        yield catalog
        index = gateway.search_index_if_built
        indexed = GaugeMetricFamily("manifold_search_index_tools", "Tools in the search index (0 until a search).")
        indexed.add_metric([], len(index.index) if index is not None else 0)
        yield indexed

        spill = gateway.spill
        written = CounterMetricFamily("manifold_spill_written_bytes", "Bytes of results written to spill files.")
        written.add_metric([], spill.bytes_written)
        yield written
        on_disk = GaugeMetricFamily("manifold_spill_bytes", "Bytes of spill files on disk now.")
        on_disk.add_metric([], spill.bytes_on_disk())
        yield on_disk

        reloader = gateway.reloader
        if reloader is not None:
            reloads = CounterMetricFamily("manifold_config_reloads", "Config reloads by result.", labels=["result"])
            reloads.add_metric(["applied"], reloader.applied)
            reloads.add_metric(["refused"], reloader.refused)
            yield reloads


def _enum(name: str, documentation: str, states: tuple[str, ...], current: Iterator[tuple[str, str]] | Any) -> Metric:
    """One gauge per (server, state), 1 for the current state and 0 for the others (Prometheus' enum style)."""
    family = GaugeMetricFamily(name, documentation, labels=["server", "state"])
    for server, state in current:
        for candidate in states:
            family.add_metric([server, candidate], 1 if candidate == state else 0)
    return family
