"""`manifold serve`: run the gateway over stdio or streamable HTTP."""

from __future__ import annotations

import contextlib
import signal
from functools import partial
from typing import Annotated

import anyio
import typer

from mcp_manifold._cli.common import EXTRA, ConfigOption, app, err, load, setting_overrides, settings_help


@app.command(context_settings=EXTRA, epilog=settings_help())
def serve(
    ctx: typer.Context,
    config: ConfigOption = None,
    http: Annotated[bool | None, typer.Option("--http/--stdio", help="Serve streamable HTTP at /mcp.")] = None,
    host: Annotated[str | None, typer.Option(help="HTTP host.")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port.")] = None,
    expose: Annotated[str | None, typer.Option(help="Surfaces, comma-separated: direct,proxy,...")] = None,
) -> None:
    """Run the gateway over stdio (default) or streamable HTTP."""
    overrides = setting_overrides(ctx.args)
    for key, value in (("http", http), ("host", host), ("port", port), ("expose", expose)):
        if value is not None:
            overrides[key] = value
    cfg = load(config, overrides)
    if cfg.settings.http:
        from mcp_manifold._front.identity import check_exposure

        check_exposure(cfg)  # before any server starts: an open gateway on a network interface is refused
    from mcp_manifold._front.signals import Stopper
    from mcp_manifold._front.stdio import serve_stdio
    from mcp_manifold._runtime.gateway import Gateway

    async def serve(gateway: Gateway, stopper: Stopper) -> None:
        if cfg.settings.http:
            # Imported here: the HTTP front brings uvicorn, starlette and the JOSE library, which a stdio
            # gateway (a desktop client's child, started often) never needs.
            from mcp_manifold._front.http import serve_http

            err.print(
                f"mcp-manifold: serving {len(cfg.enabled_servers)} server(s) at "
                f"http://{cfg.settings.host}:{cfg.settings.port}/mcp (expose: {','.join(cfg.settings.expose)})"
            )
            await serve_http(gateway, cfg.settings.host, cfg.settings.port, stopper)
        else:
            await serve_stdio(gateway, stopper)

    async def main() -> None:
        # SIGTERM (a client quitting, `kill`, systemd) ends serving like EOF or Ctrl-C does, at any
        # moment from start-up on, so the gateway still stops its servers and removes its files.
        async with anyio.create_task_group() as task_group:
            stopper = Stopper(task_group.cancel_scope.cancel)
            task_group.start_soon(stopper.watch, *([signal.SIGINT] if cfg.settings.http else []))
            async with Gateway(cfg, serving=True, single_client=not cfg.settings.http) as gateway:
                if cfg.settings.http and gateway.reloader is not None:
                    # A daemon's SIGHUP: read the config again (over stdio a hang-up still stops it).
                    stopper.on_hangup = partial(gateway.reloader.request, "signal")
                await serve(gateway, stopper)
            task_group.cancel_scope.cancel()

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(main)
