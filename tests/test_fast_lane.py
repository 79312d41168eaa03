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
import mcp_types as types
import pytest

from mcp_manifold._config import load_config
from mcp_manifold._core.clients import Caller
from mcp_manifold._core.profiles import Profile
from mcp_manifold._front.fast_lane import FastLane
from mcp_manifold._front.server import McpFront
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry, stdio_gateway

pytestmark = pytest.mark.anyio

INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def call_line(request_id: Any, name: str, arguments: dict[str, Any] | None = None, **params: Any) -> bytes:
    body = {"name": name, "arguments": arguments or {}, **params}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}).encode()


ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "lane-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
DISCOVER = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": ENVELOPE}}).encode()


class Lane:
    """A FastLane whose frames land in a list, with the task group its calls run in."""

    def __init__(self, gateway: Gateway, task_group: Any, front: McpFront | None = None) -> None:
        self.frames: list[dict[str, Any]] = []
        self.arrived = anyio.Event()
        self.lane = FastLane(gateway, self._send, front=front)
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
    assert "_meta" not in answer["result"]  # the server's own serverInfo stamp (2026-07-28) stays behind


@pytest.fixture
async def modern_lane(tmp_path: Path) -> AsyncIterator[Lane]:
    async with await open_gateway(tmp_path) as gateway, anyio.create_task_group() as task_group:
        yield Lane(gateway, task_group, McpFront(gateway))
        task_group.cancel_scope.cancel()


async def test_a_2026_call_is_answered_as_the_sdk_server_would(modern_lane: Lane) -> None:
    lane = modern_lane
    # What the SDK server does not read as a request does not decide the era for it either.
    assert not lane.take(json.dumps({"id": 9, "method": "server/discover", "params": {"_meta": ENVELOPE}}).encode())
    assert not lane.take(DISCOVER.replace(b'"id": 0', b'"id": true'))
    assert lane.lane.era is None
    assert not lane.take(DISCOVER)  # the opening request: the SDK server answers it and locks the era
    assert lane.lane.era == "stateless" and lane.lane.open
    assert lane.take(call_line(2, "kitchen_echo", {"text": "hi"}, _meta=ENVELOPE))
    answer = await lane.answer()
    assert answer["id"] == 2
    result = answer["result"]
    assert result["content"] == [{"type": "text", "text": "hi"}]
    assert result["resultType"] == "complete"  # required at 2026-07-28
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-manifold"  # the gateway's stamp
    assert lane.lane.gateway.stateless_requests == 1  # counted like any 2026-07-28 request
    # A tool error is a result too, shaped the same way.
    assert lane.take(call_line(3, "kitchen_fail", {"message": "no"}, _meta=ENVELOPE))
    failed = (await lane.answer())["result"]
    assert failed["isError"] is True and failed["resultType"] == "complete"


async def test_a_2026_servers_question_leaves_the_lane_sealed(tmp_path: Path) -> None:
    """A question of a 2026-07-28 server answered by the lane: `input_required` with the gateway's sealed
    state (the server's own is inside it, unreadable), as the SDK server would seal it."""
    path = tmp_path / "mcp.json"
    manifold = {"data_dir": str(tmp_path / "data"), "lazy": False}
    servers = {"new": server_entry("asks.py", "--era", "modern")}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": manifold}))
    async with Gateway(load_config(path)) as gateway, anyio.create_task_group() as task_group:
        lane = Lane(gateway, task_group, McpFront(gateway))
        asking = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
        lane.take(DISCOVER)
        assert lane.take(call_line(1, "new_ask_name", {}, _meta=asking))
        result = (await lane.answer())["result"]
        assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["name"]
        state = result["requestState"]
        assert isinstance(state, str) and state.startswith("v1.") and "backend" not in state
        task_group.cancel_scope.cancel()


async def test_a_2026_client_over_stdio_answers_a_question_through_the_lane(write_config: Any) -> None:
    """End to end: the lane relays the server's question, the client's retry (the SDK server's to unseal)
    reaches the server, and the call completes."""
    config = write_config({"new": server_entry("asks.py", "--era", "modern")})

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with stdio_gateway(config, mode="auto", elicitation_callback=answer) as client:
        for _ in range(2):  # the first call may start the server; the second surely takes the lane
            result = await client.call_tool("new_ask_name", {})
            assert [block.text for block in result.content if isinstance(block, types.TextContent)] == ["hello Ada"]


async def test_what_a_2026_call_needs_the_sdk_server_for_is_left_to_it(modern_lane: Lane) -> None:
    lane = modern_lane
    lane.take(DISCOVER)
    assert not lane.take(call_line(1, "kitchen_echo", {"text": "x"}))  # no envelope: the SDK refuses it
    logged = {**ENVELOPE, "io.modelcontextprotocol/logLevel": "info"}
    assert not lane.take(call_line(2, "kitchen_echo", {"text": "x"}, _meta=logged))  # logs tied to the request
    retry = {"requestState": "sealed", "inputResponses": {}}
    assert not lane.take(call_line(3, "kitchen_echo", {"text": "x"}, _meta=ENVELOPE, **retry))  # unsealed there
    unknown = {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}
    assert not lane.take(call_line(4, "kitchen_echo", {"text": "x"}, _meta=unknown))  # -32022 is the SDK's answer
    assert not lane.take(call_line(5, "kitchen_echo", {"text": "x"}, _meta={"progressToken": "p", **ENVELOPE}))
    # What the SDK server refuses as invalid params is its to refuse: an envelope of the wrong shape, a null
    # progress token, params it types beyond the name and arguments.
    nameless = {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": 5, "version": "1"}}
    assert not lane.take(call_line(6, "kitchen_echo", {"text": "x"}, _meta=nameless))
    odd = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"sampling": 5}}
    assert not lane.take(call_line(7, "kitchen_echo", {"text": "x"}, _meta=odd))
    assert not lane.take(call_line(8, "kitchen_echo", {"text": "x"}, _meta={**ENVELOPE, "progressToken": None}))
    assert not lane.take(call_line(9, "kitchen_echo", {"text": "x"}, _meta=ENVELOPE, task={"ttl": 5}))
    assert lane.frames == [] and lane.lane.gateway.stateless_requests == 0
    assert lane.take(call_line(10, "kitchen_echo", {"text": "x"}, _meta={**ENVELOPE, "example.com/mine": 1}))


async def test_a_session_lane_leaves_2026_calls_alone(lane: Lane) -> None:
    lane.take(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}')
    lane.take(INITIALIZED)
    assert lane.lane.era == "session"
    assert not lane.take(call_line(1, "kitchen_echo", {"text": "x"}, _meta=ENVELOPE))  # refused by the SDK on a session
    # Without the front, a 2026-07-28 connection never opens the lane.
    fresh = FastLane(lane.lane.gateway, lane.lane.send)
    fresh.take(DISCOVER, lane.task_group)
    assert fresh.era == "stateless" and not fresh.open


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
    assert not lane.take(call_line(7, "kitchen_echo", {"text": "t"}, _meta={"progressToken": None}))  # refused there
    assert not lane.take(call_line(8, "kitchen_echo", {"text": "t"}, task={"ttl": "soon"}))
    assert lane.frames == []


async def test_a_calls_records_follow_its_answer(lane: Lane) -> None:
    """Observers (the audit log, metrics) see a fast call right after its answer is written, not before."""
    answered_before: list[int] = []
    lane.lane.gateway.calls.observe(lambda record: answered_before.append(len(lane.frames)))
    lane.take(INITIALIZED)
    assert lane.take(call_line(1, "kitchen_echo", {"text": "x"}))
    await lane.answer()
    assert answered_before == [1]  # the frame was out when the record was made


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
