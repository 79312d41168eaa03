"""The client-facing transports: stdio (what desktop clients launch) and streamable HTTP at /mcp.

Both end on SIGTERM or SIGHUP (a client quitting, `kill`, systemd) the way they end on EOF or
Ctrl-C: by returning, so the gateway still stops its servers and removes its files on the way out.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Generator
from contextlib import contextmanager

import anyio
import uvicorn

from mcp_manifold.fast_lane import FastLane
from mcp_manifold.gateway import Gateway
from mcp_manifold.stdio_front import stdio_streams

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopper:
    """Turns SIGTERM / SIGHUP into an orderly stop: by default `stop_everything` (a cancel of the
    caller's scope); while uvicorn serves, its graceful shutdown instead."""

    def __init__(self, stop_everything: Callable[[], None]) -> None:
        self.stop = stop_everything
        self._default = stop_everything

    async def watch(self, *extra: signal.Signals) -> None:
        with anyio.open_signal_receiver(*_STOP_SIGNALS, *extra) as signals:
            async for _ in signals:
                self.stop()


async def serve_stdio(gateway: Gateway, stopper: Stopper | None = None) -> None:
    """Serve one client over this process's stdin/stdout until it hangs up (or a signal hangs up for it)."""

    def on_hangup(hang_up: Callable[[], None]) -> None:
        if stopper is not None:
            stopper.stop = hang_up  # a signal ends the input like EOF: the SDK server then stops in order

    async with stdio_streams(lambda send: FastLane(gateway, send), on_hangup) as (read_stream, write_stream):
        await gateway.server.run(read_stream, write_stream, gateway.initialization_options())


async def serve_http(gateway: Gateway, host: str, port: int, stopper: Stopper | None = None) -> None:
    """Serve any number of clients over streamable HTTP at http://host:port/mcp, one session each."""
    app = gateway.server.streamable_http_app(
        host=host, session_idle_timeout=gateway.settings.session_idle_timeout or None
    )
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
            stopper.stop = stopper._default


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling, which re-raises the signal after shutting down
    and so would kill the process before the gateway cleans up; `Stopper` handles signals."""

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield
