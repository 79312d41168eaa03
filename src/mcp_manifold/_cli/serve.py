"""`manifold serve`: run the gateway over stdio or streamable HTTP."""

from __future__ import annotations

import contextlib
import errno
import signal
import socket
import sys
from functools import partial
from typing import Annotated, Any

import anyio
import anyio.abc
import typer

from mcp_manifold._cli.common import (
    EXTRA,
    WITH_CONFIG,
    ConfigOption,
    app,
    config_path,
    err,
    load,
    parse_extra,
    settings_help,
)
from mcp_manifold._config.switches import speed_up_on
from mcp_manifold._config.warnings import config_warnings


@app.command(context_settings=EXTRA, epilog=settings_help(), options_metavar=WITH_CONFIG)
def serve(
    ctx: typer.Context,
    config: ConfigOption = None,
    http: Annotated[bool | None, typer.Option("--http/--stdio", help="Serve streamable HTTP at /mcp.")] = None,
    host: Annotated[str | None, typer.Option(help="HTTP host.")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port.")] = None,
    expose: Annotated[str | None, typer.Option(help="Surfaces, comma-separated: direct,proxy,...")] = None,
) -> None:
    """Run the gateway over stdio (default) or streamable HTTP."""
    overrides, positional = parse_extra(ctx.args)
    for key, value in (("http", http), ("host", host), ("port", port), ("expose", expose)):
        if value is not None:
            overrides[key] = value
    cfg = load(config_path(config, positional), overrides)
    for warning in config_warnings(cfg):
        err.print(f"warning: {cfg.path}: {warning}", markup=False, highlight=False)
    listener: socket.socket | None = None
    if cfg.settings.http:
        from mcp_manifold._front.identity import check_exposure

        check_exposure(cfg)  # before any server starts: an open gateway on a network interface is refused
        # Bound now and handed to uvicorn: no other process can take the port while the servers start.
        listener = _bind_port(cfg.settings.host, cfg.settings.port)
    from mcp_manifold._front.signals import Stopper
    from mcp_manifold._front.stdio import serve_stdio
    from mcp_manifold._runtime.gateway import Gateway
    from mcp_manifold._runtime.heap import settle_after_start

    async def serve(gateway: Gateway, stopper: Stopper, task_group: anyio.abc.TaskGroup) -> None:
        if cfg.settings.http:
            # Imported here: the HTTP front brings uvicorn, starlette and the JOSE library, which a stdio
            # gateway (a desktop client's child, started often) never needs.
            from mcp_manifold._front.http import serve_http

            settle_after_start(task_group)
            announce = partial(err.print, _serving_line(cfg), markup=False, highlight=False)
            await serve_http(
                gateway, cfg.settings.host, cfg.settings.port, stopper, on_listening=announce, listener=listener
            )
        else:
            settle_after_start(task_group)
            if sys.stdin.isatty():  # a person, not a client, started it: say what it waits for
                err.print(_stdio_line(cfg), markup=False, highlight=False)
            await serve_stdio(gateway, stopper)

    async def main() -> None:
        # SIGTERM (a client quitting, `kill`, systemd) ends serving like EOF or Ctrl-C does, at any
        # moment from start-up on, so the gateway still stops its servers and removes its files.
        async with anyio.create_task_group() as task_group:
            stopper = Stopper(task_group.cancel_scope.cancel)
            # Ctrl-C too, over stdio as over HTTP: left to Python (a KeyboardInterrupt, a cancel of the main
            # task), a stdio gateway once went on until its client closed stdin (a fresh-clone run of
            # test_cli); SIGTERM, watched here, never did.
            task_group.start_soon(stopper.watch, signal.SIGINT)
            async with Gateway(cfg, serving=True, single_client=not cfg.settings.http) as gateway:
                if cfg.settings.http and gateway.reloader is not None:
                    # A daemon's SIGHUP: read the config again (over stdio a hang-up still stops it).
                    stopper.on_hangup = partial(gateway.reloader.request, "signal")
                await serve(gateway, stopper, task_group)
            task_group.cancel_scope.cancel()

    with contextlib.suppress(KeyboardInterrupt), listener or contextlib.nullcontext():
        anyio.run(main, backend_options=_event_loop_options(cfg.settings.http))


def _event_loop_options(http: bool) -> dict[str, Any]:
    """uvloop for an HTTP gateway when it is installed (and not turned off with `MANIFOLD_UVLOOP=0`): its
    event loop and transports are C, which cuts the gateway's CPU per call over HTTP (docs/benchmarks.md).
    A stdio gateway keeps asyncio's loop: one client's calls gain little, and it starts often."""
    if not http or not speed_up_on("MANIFOLD_UVLOOP"):
        return {}
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def _serving_line(cfg: Any) -> str:
    """What a started HTTP gateway says once it listens: where its endpoint, dashboard and metrics are."""
    settings = cfg.settings
    base = f"http://{settings.host}:{settings.port}"
    expose = ",".join(settings.expose)
    line = f"mcp-manifold: serving {len(cfg.enabled_servers)} server(s) at {base}/mcp (expose: {expose})"
    extras = [f"dashboard {base}/ui"] * settings.dashboard + [f"metrics {base}/metrics"] * settings.metrics
    return line + (f"; {', '.join(extras)}" if extras else "")


def _stdio_line(cfg: Any) -> str:
    """What a stdio gateway started in a terminal says: it is quiet otherwise, and looks stuck."""
    count = len(cfg.enabled_servers)
    return (
        f"mcp-manifold: serving {count} server(s) over stdio, for an MCP client that runs this command and speaks "
        "JSON-RPC on stdin (Ctrl-C stops). By hand: `manifold tools`, `manifold call`, or `manifold serve --http`."
    )


def _bind_port(host: str, port: int) -> socket.socket:
    """The listening socket, or one line when the port is taken, before any server starts (uvicorn would say
    it in a traceback; and a port only checked could be taken again before uvicorn binds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        # SO_REUSEADDR, as uvicorn binds: a port in TIME_WAIT is free.
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        err.print(
            f"error: cannot serve at http://{host}:{port}: {reason} (another gateway? pick another with --port)",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(1) from None
