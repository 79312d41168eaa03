"""MCP Apps (the `io.modelcontextprotocol/ui` extension) and client extensions (SEP-2133) through the gateway."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.client.extension import advertise

from tests.conftest import server_entry

pytestmark = pytest.mark.anyio

UI = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"


def apps_client() -> dict[str, Any]:
    """Client arguments that declare MCP Apps support (what an Apps host declares)."""
    return {"extensions": [advertise(UI, {"mimeTypes": [APP_MIME]})]}


def text(result: Any) -> str:
    return result.content[0].text


@pytest.mark.parametrize("server_era", ["modern", "legacy"])
async def test_the_clients_extensions_reach_the_server(
    connect: Any, write_config: Callable[..., Path], server_era: str
) -> None:
    # A session-era server's session is told a client's extensions when it serves that client alone: over
    # stdio always, over HTTP with `session_scope: client` (a session-era client has a session of its own).
    config = write_config({"apps": server_entry("apps.py", "--era", server_era, session_scope="client")})
    shared_for_all = server_era == "legacy" and connect.transport == "http" and connect.mode == "auto"
    async with connect(config, **apps_client()) as client:
        answer = text(await client.call_tool("apps_show_clock", {}))
        assert answer == ("apps: no" if shared_for_all else "apps: yes")
    async with connect(config) as client:
        assert text(await client.call_tool("apps_show_clock", {})) == "apps: no"


async def test_the_servers_extensions_are_the_gateways(
    write_config: Callable[..., Path], http_gateway: Callable[..., str]
) -> None:
    from mcp import Client

    config = write_config({"apps": server_entry("apps.py")})
    url = http_gateway(config)
    # Extensions are a 2026-07-28 capability (the SDK drops them from a 2025-11-25 answer): a 2026 client sees them.
    async with Client(url, mode="auto") as first:
        assert UI not in (first.server_capabilities.extensions or {})  # lazy: not started yet
        await first.call_tool("apps_plain", {"text": "x"})
    async with Client(url, mode="auto") as later:
        assert UI in (later.server_capabilities.extensions or {})
