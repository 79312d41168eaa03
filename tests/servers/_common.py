"""Shared plumbing for the fixture MCP servers in this folder.

Every fixture is a standalone script: ``python tests/servers/NAME.py`` serves MCP over stdio,
``python tests/servers/NAME.py --http PORT`` serves streamable HTTP on ``http://127.0.0.1:PORT/mcp``, and the
MCPServer fixtures also serve the older HTTP+SSE transport with ``--sse PORT`` (``http://127.0.0.1:PORT/sse``).
Fixtures import this module before the SDK (see ``_preload_stdlib_numbers``); it imports the SDK lazily
so that the non-MCP fixtures (``never_ready``, ``exits_early``) start instantly.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer

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


async def report_steps(ctx: Any, steps: int) -> str:
    """The `progress` tool of the fixtures: report progress `steps` times (i of `steps`), then "done <steps>"."""
    import anyio

    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
        await anyio.sleep(0.01)
    return f"done {steps}"
