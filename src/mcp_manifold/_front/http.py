"""Streamable HTTP at http://host:port/mcp: any number of clients, one session each (session era).

uvicorn serves the SDK's streamable HTTP app; SIGTERM / SIGHUP start uvicorn's graceful shutdown,
bounded by `shutdown_timeout` (a client's open SSE stream never ends by itself).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_manifold._front.server import McpFront
from mcp_manifold._front.signals import Stopper
from mcp_manifold._runtime.gateway import Gateway


async def serve_http(gateway: Gateway, host: str, port: int, stopper: Stopper | None = None) -> None:
    """Serve any number of clients over streamable HTTP at http://host:port/mcp, one session each."""
    front = McpFront(gateway)
    starlette_app = front.server.streamable_http_app(
        host=host,
        session_idle_timeout=gateway.settings.session_idle_timeout or None,
        # Past it the SDK answers a new client 503 "Too many open sessions"; open sessions carry on.
        max_sessions=gateway.settings.max_http_sessions,
    )
    if "hub" in gateway.settings.expose:
        add_instance_endpoints(starlette_app)
    app = without_phantom_sessions(starlette_app)
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
    )
    server = _Server(config)

    def shut_down() -> None:
        # uvicorn's graceful shutdown lets open requests finish; a second signal stops waiting for them.
        server.force_exit = server.should_exit
        server.should_exit = True

    if stopper is not None:
        stopper.stop = shut_down
    try:
        await server.serve()
    finally:
        if stopper is not None:
            stopper.restore()


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling, which re-raises the signal after shutting down
    and so would kill the process before the gateway cleans up; `Stopper` handles signals."""

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


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
