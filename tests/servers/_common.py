"""Shared plumbing for the fixture MCP servers in this folder.

Every fixture is a standalone script: ``python tests/servers/NAME.py`` serves MCP over stdio,
``python tests/servers/NAME.py --http PORT`` serves streamable HTTP on ``http://127.0.0.1:PORT/mcp``, and the
MCPServer fixtures also serve the older HTTP+SSE transport with ``--sse PORT`` (``http://127.0.0.1:PORT/sse``).
Fixtures import this module before the SDK (see ``_preload_stdlib_numbers``); it imports the SDK lazily
so that the non-MCP fixtures (``never_ready``, ``exits_early``) start instantly.

Protocol eras: the SDK serves both the handshake era (``initialize``, 2025-11-25 and before) and the
2026-07-28 era (``server/discover``, per-request ``_meta``) on one endpoint. ``add_era_argument`` and
``serve`` let a fixture serve only one of them (``--era legacy|modern|both``), answering the other era the
way a server of one era would.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import logging
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any, Literal, NoReturn

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

Era = Literal["legacy", "modern", "both"]
ERAS: tuple[Era, ...] = ("legacy", "modern", "both")

HOST = "127.0.0.1"
HTTP_PATH = "/mcp"
SSE_PATH = "/sse"


def _preload_stdlib_numbers() -> None:
    """Import the stdlib ``numbers`` module with this folder hidden from ``sys.path``.

    A script's folder is ``sys.path[0]``, so the fixture ``numbers.py`` here would shadow the stdlib module of
    that name for everything imported afterwards (pydantic imports it via ``decimal``) and fail with a circular
    import. Hence every fixture must import ``_common`` before ``mcp``.
    """
    if "numbers" in sys.modules:
        return
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    try:
        importlib.import_module("numbers")
    finally:
        sys.path[:] = saved


_preload_stdlib_numbers()


def make_parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the ``--http PORT`` switch every fixture accepts."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        default=None,
        help=f"serve streamable HTTP on http://{HOST}:PORT{HTTP_PATH} instead of stdio",
    )
    parser.add_argument(
        "--sse",
        type=int,
        metavar="PORT",
        default=None,
        help=f"serve the older HTTP+SSE transport on http://{HOST}:PORT{SSE_PATH} instead of stdio",
    )
    return parser


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level ``Server`` behind an ``MCPServer``, for what MCPServer has no public API for."""
    return server._lowlevel_server


def advertise_list_changed(
    server: MCPServer[Any], *, tools: bool = False, resources: bool = False, prompts: bool = False
) -> None:
    """Advertise ``listChanged`` in the handshake-era ``initialize`` result (stdio and HTTP alike).

    ``MCPServer`` always advertises ``listChanged: false`` to handshake-era clients: both its stdio
    runner and the streamable-HTTP session manager call ``create_initialization_options()`` without
    ``NotificationOptions``. Binding the options on the instance makes both paths pick them up.
    (2026-07-28 clients derive ``listChanged`` from ``subscriptions/listen`` support instead.)
    """
    from mcp.server.lowlevel.server import NotificationOptions

    low = lowlevel(server)
    options = NotificationOptions(tools_changed=tools, resources_changed=resources, prompts_changed=prompts)
    low.create_initialization_options = functools.partial(low.create_initialization_options, options)  # type: ignore[method-assign]


def run(server: MCPServer[Any], args: argparse.Namespace) -> None:
    """Serve ``server`` over stdio, or over streamable HTTP (``--http PORT``) or SSE (``--sse PORT``)."""
    from mcp.shared.exceptions import MCPDeprecationWarning

    # The fixtures use logging, sampling and roots on purpose; the SDK flags those as deprecated
    # (2026-07-28) with a UserWarning on each use, which would only clutter the server's stderr.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    if getattr(args, "sse", None) is not None:
        server.run("sse", host=HOST, port=args.sse, sse_path=SSE_PATH)
    elif args.http is None:
        server.run()
    else:
        server.run("streamable-http", host=HOST, port=args.http, streamable_http_path=HTTP_PATH)
    exit_at_once()


def exit_at_once() -> NoReturn:
    """End the process as soon as serving has ended (its client hung up, or a signal stopped its HTTP server),
    without the interpreter's teardown: freeing the SDK's many model classes took about 0.25 s of CPU and a
    second of wall time per server, the suite starts thousands of them, and a gateway stopping waits for its
    servers to exit. A fixture keeps nothing for that teardown to do: its logs and output are flushed here."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # the client may have closed the pipe already
            stream.flush()
    os._exit(0)


# --- serving one protocol era only -------------------------------------------------------------------------


def add_era_argument(parser: argparse.ArgumentParser, default: Era = "both") -> None:
    """Add ``--era legacy|modern|both``: which protocol era(s) the fixture answers."""
    parser.add_argument(
        "--era",
        choices=ERAS,
        default=default,
        help="legacy: only the initialize handshake (2025-11-25 and before); modern: only 2026-07-28 "
        f"(server/discover and per-request _meta); both: whichever the client opens with (default {default})",
    )


def _modern_only_error(requested: str | None) -> Any:
    """The error a 2026-07-28-only server answers a handshake-era request with: -32022, naming what it serves."""
    from mcp_types import UNSUPPORTED_PROTOCOL_VERSION, ErrorData, UnsupportedProtocolVersionErrorData
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    supported = list(MODERN_PROTOCOL_VERSIONS)
    return ErrorData(
        code=UNSUPPORTED_PROTOCOL_VERSION,
        message=f"this server speaks only MCP {', '.join(supported)} (server/discover and per-request _meta); "
        "the initialize handshake and earlier protocol versions are refused",
        data=UnsupportedProtocolVersionErrorData(supported=supported, requested=requested or "").model_dump(
            mode="json"
        ),
    )


def refuse_handshake_era(server: Server[Any]) -> None:
    """Make `server` answer every request of the handshake era (``initialize`` first of all) with -32022.

    Installed as the outermost middleware, so nothing else runs for such a request. Used on stdio, where
    the SDK decides the era from the client's first request; HTTP is gated in front of the app instead.
    """
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    async def refuse(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            offered = (ctx.params or {}).get("protocolVersion") if ctx.method == "initialize" else None
            requested = offered if isinstance(offered, str) else ctx.protocol_version
            raise MCPError.from_error_data(_modern_only_error(requested))
        return await call_next(ctx)

    server.middleware.insert(0, refuse)


def era_gate(app: ASGIApp, era: Era) -> ASGIApp:
    """Wrap a streamable-HTTP app so it answers only `era`, judged by the MCP-Protocol-Version header.

    modern: anything without a 2026-07-28 header (``initialize``, a 2025 session's requests and streams) gets
    HTTP 400 with the -32022 error. legacy: a request claiming a later version gets HTTP 400 with -32600, as a
    2025-11-25 server answers an unknown protocol version, so an auto-negotiating client falls back to
    ``initialize``. Refused before the SDK sees the request, so no session is opened for it.
    """
    if era == "both":
        return app
    import json

    from mcp_types import INVALID_REQUEST
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
    from starlette.responses import Response

    async def gated(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"), None)
        if era == "modern" and header not in MODERN_PROTOCOL_VERSIONS:
            message = await _read_json(receive) if scope["method"] == "POST" else None
            offered = (message.get("params") or {}).get("protocolVersion") if message else None
            error = _modern_only_error(offered if isinstance(offered, str) else header).model_dump(
                mode="json", exclude_none=True
            )
        elif era == "legacy" and header is not None and header not in HANDSHAKE_PROTOCOL_VERSIONS:
            error = {
                "code": INVALID_REQUEST,
                "message": f"Bad Request: unsupported protocol version {header!r}; this server speaks "
                f"{', '.join(HANDSHAKE_PROTOCOL_VERSIONS)} through the initialize handshake",
            }
        else:
            await app(scope, receive, send)
            return
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error})
        await Response(body, status_code=400, media_type="application/json")(scope, receive, send)

    return gated


def serve(server: Server[Any], args: argparse.Namespace, era: Era = "both") -> None:
    """Serve a low-level `server` (or an MCPServer's) over stdio or ``--http PORT``, answering only `era`."""
    from mcp.shared.exceptions import MCPDeprecationWarning

    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # see `run`
    if era == "modern":
        refuse_handshake_era(server)
    if args.http is None:
        import anyio

        anyio.run(_serve_stdio, server, era)
        exit_at_once()
    import uvicorn

    app = server.streamable_http_app(host=HOST, streamable_http_path=HTTP_PATH)
    uvicorn.run(era_gate(app, era), host=HOST, port=args.http, log_level="warning")
    exit_at_once()


async def _read_json(receive: Receive) -> dict[str, Any] | None:
    """The request body as a JSON object, or None (a refusal only uses it to name what the client offered)."""
    import json

    chunks: list[bytes] = []
    while True:
        event = await receive()
        chunks.append(event.get("body", b""))
        if not event.get("more_body"):
            break
    try:
        message = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


async def _serve_stdio(server: Server[Any], era: Era) -> None:
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        if era != "legacy":
            await server.run(read, write, server.create_initialization_options())
            return
        # `Server.run` would let a 2026-07-28 client's first request switch the connection to that era;
        # the handshake-only loop answers server/discover as a 2025 server does: method not found.
        async with server.lifespan(server) as state:
            await serve_loop(
                server, read, write, lifespan_state=state, init_options=server.create_initialization_options()
            )


async def report_steps(ctx: Any, steps: int) -> str:
    """The `progress` tool of the fixtures: report progress `steps` times (i of `steps`), then "done <steps>"."""
    import anyio

    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
        await anyio.sleep(0.01)
    return f"done {steps}"
