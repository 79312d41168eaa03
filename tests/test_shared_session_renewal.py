"""A shared session-era session is reopened to declare the extensions its clients now share (common_extensions)
only between requests: never under a client's call that is still running on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import advertise

from tests.conftest import free_port, gateway_over_http, server_entry

UI = "io.modelcontextprotocol/ui"


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.anyio
async def test_a_health_ping_does_not_reopen_the_shared_session_under_a_running_call(tmp_path: Path) -> None:
    """A client that declares an extension opens the shared session; while its slow call runs, a client
    that declares none connects (the extensions in common change), and the health pings go on: the call
    still gets its answer."""
    config = tmp_path / "mcp.json"
    servers = {"kitchen": server_entry("kitchen.py", protocol="legacy")}
    settings = {"data_dir": str(tmp_path / "data"), "ping_interval": 0.5}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    answers: list[Any] = []
    with gateway_over_http(config, port, timeout=60, stderr=(tmp_path / "gateway.log").open("wb")):
        async with Client(url, mode="legacy", extensions=[advertise(UI, {"mimeTypes": ["text/html"]})]) as host:
            assert text_of(await host.call_tool("kitchen_echo", {"text": "hi"})) == "hi"  # the session opens

            async def slow() -> None:
                answers.append(await host.call_tool("kitchen_slow", {"seconds": 4}))

            async with anyio.create_task_group() as group:
                group.start_soon(slow)
                await anyio.sleep(1)
                async with Client(url, mode="legacy") as other:  # declares no extension
                    await other.list_tools()
                    await anyio.sleep(2.5)  # pings come meanwhile
    (answer,) = answers
    assert not answer.is_error and text_of(answer) == "slept", text_of(answer)
