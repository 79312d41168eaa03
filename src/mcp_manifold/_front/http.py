"""Streamable HTTP at http://host:port/mcp: any number of clients, one session each (session era).

uvicorn serves the SDK's streamable HTTP app behind `guard` (`_front/auth.py`): authentication when
the config has an `auth` section, and profiles (`/mcp/p/<profile>`). SIGTERM (and Ctrl-C) start
uvicorn's graceful shutdown, bounded by `shutdown_timeout` (a client's open SSE stream never ends by
itself). SIGHUP reloads the config (`_front/signals.py`).

Beside /mcp, on the same host and port, the operator routes: `/metrics` (Prometheus) and `/ui` (the
dashboard). `build_app` is the one place where routes are assembled and wrapped: every route sits
behind the same authentication as /mcp, except the dashboard's page itself, which holds no data (it
asks the guarded API, and for a key when the API wants one). `/metrics` and the dashboard's overview
and calls are for operators only (`_front/operators.py`); its tools and search show a non-operator
its own view.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Generator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

import uvicorn
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_manifold._front.auth import guard
from mcp_manifold._front.http_lane import HttpLane, LaneCounts, lane_enabled
from mcp_manifold._front.identity import check_exposure, is_loopback
from mcp_manifold._front.large_requests import LargeRequests, MemoryBudget
from mcp_manifold._front.misread import answering_misread_requests
from mcp_manifold._front.operators import OperatorsOnly
from mcp_manifold._front.probes import PROBE_PATHS, probe_routes
from mcp_manifold._front.request_deadlines import request_deadline_protocol
from mcp_manifold._front.server import McpFront
from mcp_manifold._front.session_quota import SessionQuota
from mcp_manifold._front.signals import Stopper
from mcp_manifold._runtime.gateway import Gateway

logger = logging.getLogger(__name__)

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")  # as a client writes them in Host and Origin


def build_app(gateway: Gateway, host: str, stack: AsyncExitStack) -> ASGIApp:
    """The HTTP front's app: MCP at /mcp, and the operator routes the settings turn on (`operator_routes`),
    all behind `guard`.

    `stack` owns what the operator routes watch (call observers); closing it detaches them.
    """
    check_exposure(gateway.config)
    front = McpFront(gateway)
    lane_counts = LaneCounts()
    starlette_app = front.server.streamable_http_app(
        host=host,
        transport_security=rebinding_check(host),
        session_idle_timeout=gateway.settings.session_idle_timeout or None,
        # Past it the SDK answers a new client 503 "Too many open sessions"; open sessions carry on.
        max_sessions=gateway.settings.max_http_sessions,
        custom_starlette_routes=[
            *probe_routes(gateway),
            *shared_routes(gateway),
            *operator_routes(gateway, host, stack, lane_counts),
        ],
    )
    if "hub" in gateway.settings.expose:
        add_instance_endpoints(starlette_app)
    # Plain tools/call requests, answered without the SDK's HTTP machinery (counted either way).
    manager = front.server.session_manager
    # A request with an `id` JSON-RPC does not allow is answered before the SDK sees it; the lane takes
    # only string and integer ids, so what it answers never needs that look.
    # One principal's share of the sessions: refused before the SDK opens one (`session_quota.py`).
    quota = SessionQuota(starlette_app, manager, gateway.settings.principal_max_sessions, lambda: gateway.config.auth)
    sdk_app = answering_misread_requests(without_phantom_sessions(quota))
    app = HttpLane(front, sdk_app, manager, lane_counts, enabled=lane_enabled())
    # Large bodies in flight, bounded together by what they may cost in memory (`large_requests.py`).
    budget = MemoryBudget(gateway.settings.request_memory_mb * 1024 * 1024)
    app = LargeRequests(app, budget, manager.max_request_body_size)
    # The one place the app's routes get wrapped: every route above needs what `auth` asks for.
    dashboard = gateway.settings.dashboard
    # Served without a client's credential: the probes and the dashboard's page hold no data; the replicas'
    # own route checks the token they share.
    unguarded = PROBE_PATHS | ({"/_manifold/held"} if gateway.shared is not None else set())

    def open_path(path: str) -> bool:
        return path in unguarded or (dashboard and dashboard_page(path))

    return hang_ups_unlogged(guard(app, lambda: gateway.config, open_path))


def hang_ups_unlogged(app: ASGIApp) -> ASGIApp:
    """A client that hangs up before its request's body is all in leaves nobody to answer: Starlette's
    `ClientDisconnect` (met reading the body) ends that request quietly. uvicorn logged it as the app's
    error, a traceback of some 60 lines each time, so one client could fill the log."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await app(scope, receive, send)
        except ClientDisconnect:
            logger.debug("HTTP: %s %s: its client hung up before its body was in", scope["method"], scope["path"])

    return wrapped


def dashboard_page(path: str) -> bool:
    """The dashboard's page and its static files, which hold no data (its API, /ui/api, is guarded)."""
    return path == "/ui" or (path.startswith("/ui/") and not path.startswith("/ui/api"))


def shared_routes(gateway: Gateway) -> list[BaseRoute]:
    """The replicas' own route, when they share state (imported only then: it needs the shared-state parts)."""
    if gateway.shared is None:
        return []
    from mcp_manifold._front.replica_route import replica_routes

    return replica_routes(gateway)


def operator_routes(
    gateway: Gateway, host: str, stack: AsyncExitStack, lane_counts: LaneCounts | None = None
) -> list[BaseRoute]:
    """/metrics and /ui, as the settings ask, each checked like /mcp against DNS rebinding."""
    routes: list[BaseRoute] = [Route("/", endpoint=_SameHost(_front_door(gateway), host))]
    if gateway.settings.metrics:
        from prometheus_client import make_asgi_app

        from mcp_manifold._runtime.metrics import GatewayMetrics

        metrics = GatewayMetrics(gateway, lane_counts.snapshot if lane_counts is not None else None)
        stack.callback(metrics.attach())
        routes.append(Route("/metrics", endpoint=_SameHost(OperatorsOnly(make_asgi_app(metrics.registry)), host)))
    if gateway.settings.dashboard:
        from mcp_manifold._front.dashboard import Dashboard

        dashboard = Dashboard(gateway)
        stack.callback(dashboard.attach())
        routes.append(Mount("/ui/api", app=_SameHost(dashboard.api_app(), host)))
        routes.append(Mount("/ui", app=_SameHost(dashboard.page_app(), host)))
    return routes


def _front_door(gateway: Gateway) -> ASGIApp:
    """`/`: what is served here, for a person who opened the address in a browser (not Not Found)."""
    from starlette.responses import PlainTextResponse

    from mcp_manifold._version import __version__

    lines = [f"mcp-manifold {__version__}", "", "/mcp      the MCP endpoint (streamable HTTP): point a client here"]
    if gateway.settings.dashboard:
        lines.append("/ui       the dashboard")
    if gateway.settings.metrics:
        lines.append("/metrics  Prometheus metrics")
    return PlainTextResponse("\n".join(lines) + "\n")


def rebinding_check(host: str) -> TransportSecuritySettings | None:
    """On every loopback address, the Host and Origin a request may name: the loopback names and the address
    served on. None elsewhere (authentication guards a network address).

    The SDK turns its check on for `127.0.0.1`, `localhost` and `::1` only, where the gateway counts every
    loopback address (`127.0.0.2`, Debian's `127.0.1.1`) as one it may serve open: there a web page whose
    name was rebound to the address called every tool and read the dashboard.
    """
    if not is_loopback(host):
        return None
    bound = host.strip().strip("[]").lower()
    names = [*_LOOPBACK_NAMES, f"[{bound}]" if ":" in bound else bound]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in dict.fromkeys(names)],
        allowed_origins=[f"http://{name}:*" for name in dict.fromkeys(names)],
    )


class _SameHost:
    """On a loopback host, the DNS-rebinding check of /mcp (Host and Origin headers, `rebinding_check`) for an
    operator route too: a web page the operator visits must not read the dashboard through a rebound name.

    A class, not a function: Starlette would take a function for a request handler, not an ASGI app.
    """

    def __init__(self, app: ASGIApp, host: str) -> None:
        self.app = app
        settings = rebinding_check(host)
        self.check = TransportSecurityMiddleware(settings) if settings is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.check is not None and scope["type"] == "http":
            refusal = await self.check.validate_request(Request(scope, receive))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def serve_http(
    gateway: Gateway,
    host: str,
    port: int,
    stopper: Stopper | None = None,
    on_listening: Callable[[], object] | None = None,
    listener: socket.socket | None = None,
) -> None:
    """Serve any number of clients over streamable HTTP at http://host:port/mcp, one session each.

    `on_listening` is called once the port is bound (never when binding failed). `listener`: a socket
    already bound to host:port (`manifold serve` binds it before the servers start), else uvicorn binds."""
    async with AsyncExitStack() as stack:
        app = build_app(gateway, host, stack)
        await _serve(app, gateway, host, port, stopper, on_listening, listener)


async def _serve(
    app: Any,
    gateway: Gateway,
    host: str,
    port: int,
    stopper: Stopper | None,
    on_listening: Any = None,
    listener: socket.socket | None = None,
) -> None:
    level = gateway.settings.log_level
    # uvicorn's access log only at debug: one line per MCP message is noise at any other level.
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=level,
        lifespan="on",
        access_log=level == "debug",
        # A client's standing SSE stream never finishes on its own: unbounded, a graceful shutdown
        # would wait for every connected client to leave.
        timeout_graceful_shutdown=gateway.settings.shutdown_timeout,
        # A connection slow to send its request is closed: uvicorn alone keeps it for ever (request_deadlines.py).
        http=request_deadline_protocol(gateway.settings.header_timeout, gateway.settings.body_timeout),
    )
    server = _Server(config)
    server.on_listening = on_listening

    def shut_down() -> None:
        # uvicorn's graceful shutdown lets open requests finish; a second signal stops waiting for them.
        server.force_exit = server.should_exit
        server.should_exit = True

    if stopper is not None:
        stopper.stop = shut_down
    try:
        await server.serve(sockets=[listener] if listener is not None else None)
    finally:
        if stopper is not None:
            stopper.restore()


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling, which re-raises the signal after shutting down
    and so would kill the process before the gateway cleans up; `Stopper` handles signals."""

    on_listening: Callable[[], object] | None = None

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_listening is not None:
            self.on_listening()  # only now is "serving at ..." true


def without_phantom_sessions(app: ASGIApp) -> ASGIApp:
    """Refusals of requests that named no session carry no `mcp-session-id`.

    mcp 2.3.0 opens a session for every request without one and discards it again when the request is
    refused (a GET or a POST that is not `initialize`), but the refusal still names the discarded
    session, which a client may then try to use.
    """

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or any(name == b"mcp-session-id" for name, _ in scope["headers"]):
            await app(scope, receive, send)
            return

        async def send_without_phantom(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                headers = [(name, value) for name, value in message.get("headers", []) if name != b"mcp-session-id"]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_without_phantom)

    return wrapped


def add_instance_endpoints(app: Starlette) -> None:
    """`/mcp/instances/<instance_id>`: the MCP endpoint again, for clients that want one hub instance's lists
    at their own address (2026-07-28 clients have no session to connect one in). The same handler as
    `/mcp`, whatever wraps it (authentication), so both addresses answer alike."""
    mcp = next(route for route in app.routes if isinstance(route, Route) and route.path == "/mcp")
    app.router.routes.append(Route("/mcp/instances/{instance_id}", endpoint=mcp.endpoint))
