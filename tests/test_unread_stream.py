"""A client that stops reading its stream costs the gateway a bounded amount, and nobody else anything.

A session-era client's GET stream carries what it is sent unasked (resource updates, list changes, server
logs). One that opened it and stopped reading (a laptop asleep with its session open, or a caller who
means it) kept a task and its message in the gateway for each such message: any caller may subscribe to
a long URI under a server's prefix and touch it, and 1,200 updates of 100 KB held 244 MB (a URI is
bounded at 4,096 characters since)
(`_front/unasked.py`). Now that client is sent its messages one at a time, a few waiting at most, and
after a few seconds without taking one it is sent nothing for a while, which the log says.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from tests.conftest import free_port, server_entry, stop_process, wait_for_port

pytestmark = pytest.mark.anyio

# Any URI under the server's prefix may be subscribed to, up to 4,096 characters (`back_channel`).
LONG_URI = "kitchen://greeting/" + "A" * 4_000
TEXT = "kitchen+kitchen://text"
HEAD = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "asleep", "version": "1"}},
}


async def _open_unread_stream(url: str, port: int) -> socket.socket:
    """A session subscribed to the long URI, whose GET stream is opened on a small buffer and never read."""
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(url, json=INITIALIZE, headers=HEAD)
        session = {**HEAD, "Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        subscribe = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "resources/subscribe",
            "params": {"uri": "kitchen+" + LONG_URI},
        }
        assert (await http.post(url, json=subscribe, headers=session)).status_code == 200
    asleep = socket.socket()
    asleep.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    asleep.connect(("127.0.0.1", port))
    lines = ["GET /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in session.items())]
    asleep.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return asleep


@pytest.mark.session_era("resources/subscribe")
async def test_a_client_that_stops_reading_its_stream_is_sent_nothing_for_a_while(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    settings = {"data_dir": str(tmp_path / "data"), "lazy": False, "log_level": "warning"}
    config.write_text(json.dumps({"mcpServers": {"kitchen": server_entry("kitchen.py")}, "manifold": settings}))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(iter(process.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification) and message.params.uri == TEXT:
            heard.set()

    try:
        wait_for_port(port, process)
        asleep = await _open_unread_stream(url, port)
        async with Client(url, mode="legacy", message_handler=on_message) as awake:
            await awake.subscribe_resource(TEXT)
            with anyio.fail_after(60):
                # Updates for the client that does not read, past its socket's buffers, until it has taken
                # none for a while.
                while not any("took no message in" in line for line in said):
                    await awake.call_tool("kitchen_touch", {"uri": LONG_URI})
                await awake.call_tool("kitchen_touch", {"uri": "kitchen://text"})
                await heard.wait()  # a client that reads is sent its updates all along
        asleep.close()
    finally:
        stop_process(process)
    warning = next(line for line in said if "took no message in" in line)
    assert "so it is sent nothing for 10s" in warning and "is it reading its stream?" in warning, warning
