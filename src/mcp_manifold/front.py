"""The client-facing transports: stdio (what desktop clients launch) and streamable HTTP at /mcp."""

from __future__ import annotations

import uvicorn

from mcp_manifold.fast_lane import FastLane
from mcp_manifold.gateway import Gateway
from mcp_manifold.stdio_front import stdio_streams


async def serve_stdio(gateway: Gateway) -> None:
    """Serve one client over this process's stdin/stdout until it hangs up."""
    async with stdio_streams(lambda send: FastLane(gateway, send)) as (read_stream, write_stream):
        await gateway.server.run(read_stream, write_stream, gateway.initialization_options())


async def serve_http(gateway: Gateway, host: str, port: int, *, ready: object = None) -> None:
    """Serve any number of clients over streamable HTTP at http://host:port/mcp, one session each."""
    app = gateway.server.streamable_http_app(
        host=host, session_idle_timeout=gateway.settings.session_idle_timeout or None
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    await server.serve()
