"""The stdio front's wire (`_front/stdio.py`): what the client reads, and in what order, with the fast lane
on and off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import server_entry
from tests.raw_wire import RawStdio

pytestmark = pytest.mark.anyio

CALLS = 40


def gateway_config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    manifold = {"data_dir": str(tmp_path / "data"), "expose": ["direct"]}  # `direct` alone: the lane's
    path.write_text(json.dumps({"mcpServers": {"kitchen": server_entry("kitchen.py")}, "manifold": manifold}))
    return path


@pytest.mark.parametrize("lane", ["1", "0"], ids=["lane", "sdk"])
async def test_a_log_sent_during_a_call_reaches_the_client_before_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: str
) -> None:
    """The server's log goes out through the SDK server, the lane's answer straight to the pipe: the
    client must still read them in the order the server sent them, call after call."""
    monkeypatch.setenv("MANIFOLD_STDIO_LANE", lane)
    async with RawStdio(gateway_config(tmp_path)) as gateway:
        await gateway.open_session()
        late: list[Any] = []
        for number in range(CALLS):
            start = len(gateway.messages)
            arguments = {"message": f"note {number}", "level": "warning"}
            answer = await gateway.request("tools/call", {"name": "kitchen_log", "arguments": arguments})
            assert answer["result"]["content"][0]["text"] == "logged", answer
            before = gateway.messages[start : gateway.messages.index(answer)]
            if not any(message.get("params", {}).get("data") == f"note {number}" for message in before):
                late.append(number)
        assert late == [], f"calls whose log came after their answer: {late}"
