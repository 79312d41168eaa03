"""FastMCP's proxy in front of one stdio MCP server, for `bench/overhead.py`.

Runs with the separate FastMCP virtualenv (``bench/.venv-fastmcp/bin/python``), never the project's:

    python bench/_fastmcp_proxy.py [--http PORT] -- COMMAND [ARG...]
    python bench/_fastmcp_proxy.py [--http PORT] --url http://127.0.0.1:PORT/mcp

The backend is a stdio server (``COMMAND ARG...``; in the benchmark the project's Python running
``tests/servers/kitchen.py``) or a streamable-HTTP server (``--url``). The proxy is built with
``fastmcp.server.create_proxy``, the factory FastMCP recommends, with its defaults: a stdio backend gets
a ``StdioTransport`` with ``keep_alive=True`` (one backend process for the proxy's whole life), and the
backend session mirrors the front's protocol era (a handshake-era client gets a handshake-era backend).
The proxy serves stdio by default, streamable HTTP at ``http://127.0.0.1:PORT/mcp`` with ``--http PORT``.
"""

from __future__ import annotations

import argparse
import logging
import os

# Keep FastMCP quiet: no banner, warnings only, so timings include no console output.
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_LOG_LEVEL", "WARNING")

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", default=None, help="serve streamable HTTP on PORT")
    parser.add_argument("--url", default=None, help="streamable-HTTP URL of the backend (instead of a command)")
    parser.add_argument("backend", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...] of the stdio backend")
    args = parser.parse_args()
    backend = args.backend[1:] if args.backend[:1] == ["--"] else args.backend
    if bool(backend) == bool(args.url):
        parser.error("give either --url URL or the backend command after --")
    logging.getLogger("fastmcp").setLevel(logging.WARNING)
    if args.url:
        proxy = create_proxy(args.url, name="fastmcp-proxy")
    else:
        transport = StdioTransport(command=backend[0], args=backend[1:], env=dict(os.environ))
        proxy = create_proxy(transport, name="fastmcp-proxy")
    if args.http is None:
        proxy.run(show_banner=False)
    else:
        proxy.run("http", show_banner=False, host="127.0.0.1", port=args.http, path="/mcp", log_level="warning")


if __name__ == "__main__":
    main()
