"""The fast lane, in process: which raw `tools/call` lines it takes, what it answers, how it cancels.

A real gateway with a real fixture backend; the lane's output is collected instead of written to
stdout. End to end over stdio, every test of `test_gateway.py` also goes through it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_manifold._config import load_config
from mcp_manifold._core.clients import Caller
from mcp_manifold._core.profiles import Profile
from mcp_manifold._front.fast_lane import FastLane
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio

INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def call_line(request_id: Any, name: str, arguments: dict[str, Any] | None = None, **params: Any) -> bytes:
    body = {"name": name, "arguments": arguments or {}, **params}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}).encode()


class Lane:
    """A FastLane whose frames land in a list, with the task group its calls run in."""

    def __init__(self, gateway: Gateway, task_group: Any) -> None:
        self.frames: list[dict[str, Any]] = []
        self.arrived = anyio.Event()
        self.lane = FastLane(gateway, self._send)
        self.task_group = task_group

    async def _send(self, frame: bytes) -> None:
        assert frame.endswith(b"\n") and frame.count(b"\n") == 1
        self.frames.append(json.loads(frame))
        self.arrived.set()

    def take(self, line: bytes) -> bool:
        return self.lane.take(line, self.task_group)

    async def answer(self) -> dict[str, Any]:
        with anyio.fail_after(10):
            await self.arrived.wait()
        self.arrived = anyio.Event()
        return self.frames.pop(0)


async def open_gateway(tmp_path: Path, **settings: Any) -> Gateway:
    path = tmp_path / "mcp.json"
    manifold = {"data_dir": str(tmp_path / "data"), "lazy": False, **settings}
    path.write_text(json.dumps({"mcpServers": {"kitchen": server_entry("kitchen.py")}, "manifold": manifold}))
    return Gateway(load_config(path))


@pytest.fixture
async def lane(tmp_path: Path) -> AsyncIterator[Lane]:
    async with await open_gateway(tmp_path) as gateway, anyio.create_task_group() as task_group:
        yield Lane(gateway, task_group)
        task_group.cancel_scope.cancel()


async def test_a_plain_call_is_answered_after_initialize(lane: Lane) -> None:
    assert not lane.take(call_line(1, "kitchen_echo", {"text": "early"}))  # before initialized: the SDK's
    assert not lane.take(INITIALIZED)
    assert lane.take(call_line(2, "kitchen_echo", {"text": "hi"}))
    answer = await lane.answer()
    assert answer["id"] == 2 and answer["jsonrpc"] == "2.0"
    assert answer["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert "isError" not in answer["result"] or answer["result"]["isError"] is False


async def test_what_needs_the_full_path_is_left_to_it(lane: Lane) -> None:
    lane.take(INITIALIZED)
    assert not lane.take(call_line(1, "kitchen_progress", {"steps": 2}, _meta={"progressToken": "p"}))
    assert not lane.take(call_line(2, "no_such_tool"))
    assert not lane.take(b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":')  # not JSON: the SDK answers
    assert not lane.take(b'{"jsonrpc":"2.0","id":4,"method":"tools/list"}')
    assert not lane.take(b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":7}}')
    # A trace to continue: the SDK server carries the client's traceparent on to the backend.
    traced = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    assert not lane.take(call_line(6, "kitchen_echo", {"text": "t"}, _meta=traced))
    assert lane.frames == []


async def test_backend_errors_become_tool_errors(lane: Lane) -> None:
    lane.take(INITIALIZED)
    assert lane.take(call_line("a", "kitchen_fail", {"message": "broken on purpose"}))
    answer = await lane.answer()
    assert answer["id"] == "a"
    assert answer["result"]["isError"] is True
    assert "broken on purpose" in answer["result"]["content"][0]["text"]


async def test_a_cancelled_call_gets_no_answer_and_the_lane_keeps_serving(lane: Lane) -> None:
    lane.take(INITIALIZED)
    assert lane.take(call_line(7, "kitchen_slow", {"seconds": 5}))
    await anyio.sleep(0.2)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    assert lane.take(json.dumps(cancel).encode())
    # A cancel for a request the lane does not own is the SDK server's business.
    cancel["params"]["requestId"] = 99
    assert not lane.take(json.dumps(cancel).encode())
    assert lane.take(call_line(8, "kitchen_echo", {"text": "still here"}))
    answer = await lane.answer()
    assert answer["id"] == 8 and answer["result"]["content"][0]["text"] == "still here"
    assert lane.frames == []
    assert lane.lane._in_flight == {}


async def test_other_surfaces_and_spilling_turn_the_lane_off(tmp_path: Path) -> None:
    for settings in ({"expose": ["direct", "proxy"]}, {"spill_threshold": 1000}):
        async with await open_gateway(tmp_path, **settings) as gateway:
            assert gateway.fast_route("kitchen_echo", Caller("t")) is None
    async with await open_gateway(tmp_path) as gateway:
        route = gateway.fast_route("kitchen_echo", Caller("t"))
        assert route is not None and route.server == "kitchen" and route.name == "echo"
        # A tool the caller's profile hides goes the normal way, which answers it like an unknown name.
        gateway.config.profiles["echo-less"] = Profile("echo-less", tools=("!kitchen_echo",))
        assert gateway.fast_route("kitchen_echo", Caller("t", profile="echo-less")) is None
        assert gateway.fast_route("kitchen_add", Caller("t", profile="echo-less")) is not None
