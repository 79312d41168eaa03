"""A client's log level is its own: one session's logging/setLevel never silences another's log messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.conftest import server_entry

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),  # logging/setLevel
]


def write(tmp_path: Path, protocol: str) -> Path:
    path = tmp_path / "mcp.json"
    servers = {"kitchen": server_entry("kitchen.py", protocol=protocol)}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(tmp_path / "data")}}))
    return path


class Logs:
    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.received.append((params.level, params.data))

    async def wait_for(self, data: str) -> None:
        with anyio.fail_after(20):
            while data not in [item[1] for item in self.received]:
                await anyio.sleep(0.02)


# The server speaks the handshake era (it is told logging/setLevel) or 2026-07-28 (told a level per request).
@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_one_sessions_set_level_applies_to_it_alone(tmp_path: Path, http_gateway: Any, protocol: str) -> None:
    url = http_gateway(write(tmp_path, protocol))
    quiet, listening = Logs(), Logs()
    async with (
        Client(url, mode="legacy", logging_callback=quiet) as quiet_client,
        Client(url, mode="legacy", logging_callback=listening) as listening_client,
    ):
        assert (await listening_client.call_tool("kitchen_echo", {"text": "up"})).content  # both sessions exist
        await quiet_client.set_logging_level("emergency")

        await listening_client.call_tool("kitchen_log", {"message": "for the listener", "level": "warning"})
        await listening.wait_for("for the listener")  # not silenced by the other session's level

        await quiet_client.call_tool("kitchen_log", {"message": "below its level", "level": "warning"})
        await quiet_client.call_tool("kitchen_log", {"message": "at its level", "level": "emergency"})
        await quiet.wait_for("at its level")
        assert quiet.received == [("emergency", "at its level")]  # nothing below the level it set

        await listening_client.set_logging_level("error")  # its own level, which the quiet one keeps too
        await listening_client.call_tool("kitchen_log", {"message": "a warning", "level": "warning"})
        await listening_client.call_tool("kitchen_log", {"message": "an error", "level": "error"})
        await listening.wait_for("an error")
        assert ("warning", "a warning") not in listening.received
        await quiet_client.call_tool("kitchen_log", {"message": "an error too", "level": "error"})
        await quiet_client.call_tool("kitchen_log", {"message": "last", "level": "emergency"})
        await quiet.wait_for("last")
        assert quiet.received == [("emergency", "at its level"), ("emergency", "last")]
