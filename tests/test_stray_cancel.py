"""A cancellation nothing asked for ends one request with an error, never the connection (`_front/stray_cancel.py`).

anyio ends a whole task group when one of its tasks ends in such a cancellation; on stdio that group is the
client's connection, and so the gateway. A held call once raised one (test_held_calls); here the call path
raises one on purpose for one call, and the SDK server's path (a real SDK client in both modes, in-process)
and the stdio fast lane must answer that call with an error and go on serving.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio._backends._asyncio import _task_states
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from mcp_manifold._config import load_config
from mcp_manifold._core.clients import Caller
from mcp_manifold._front.fast_lane import FastLane
from mcp_manifold._front.server import McpFront
from mcp_manifold._front.stray_cancel import refusing_stray_cancellations
from mcp_manifold._runtime.backends import Backend
from mcp_manifold._runtime.call_path import CallPath
from mcp_manifold._runtime.cancellation import stray_cancellation
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio

STRAY = "stray"  # the text whose echo meets a cancellation nothing asked for
STRAY_GROUPED = "stray, grouped"  # ... one in an exception group, as a task group lets it out


@pytest.fixture
async def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    original = CallPath.call_tool

    async def call_tool(self: CallPath, request: Any, call: Any) -> Any:
        text = (call.arguments or {}).get("text")
        if text == STRAY:
            raise asyncio.CancelledError  # from outside anyio: no scope asked for it
        if text == STRAY_GROUPED:
            raise BaseExceptionGroup("a task group's", [asyncio.CancelledError()])
        return await original(self, request, call)

    monkeypatch.setattr(CallPath, "call_tool", call_tool)
    path = tmp_path / "mcp.json"
    manifold = {"data_dir": str(tmp_path / "data"), "lazy": False, "expose": ["direct"]}  # `direct` alone: the lane's
    path.write_text(json.dumps({"mcpServers": {"kitchen": server_entry("kitchen.py")}, "manifold": manifold}))
    async with Gateway(load_config(path), serving=True) as running:
        yield running


@pytest.mark.parametrize("stray", [STRAY, STRAY_GROUPED])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_servers_path_answers_the_request_an_error_and_serves_on(
    gateway: Gateway, mode: str, stray: str
) -> None:
    async with Client(McpFront(gateway).server, mode=mode, read_timeout_seconds=10) as client:
        with pytest.raises(MCPError) as failed, anyio.fail_after(10):
            await client.call_tool("kitchen_echo", {"text": stray})
        assert failed.value.error.code == types.INTERNAL_ERROR
        assert failed.value.error.message == "the request failed in the gateway"
        with anyio.fail_after(10):
            after = await client.call_tool("kitchen_echo", {"text": "next"})
        assert after.content[0].text == "next"  # type: ignore[union-attr]


async def lane_takes_echo(gateway: Gateway) -> None:
    """Until the lane may take `kitchen_echo`: its server running and its tools in the catalog."""
    with anyio.fail_after(30):
        while gateway.fast_route("kitchen_echo", Caller("lane")) is None:
            await anyio.sleep(0.05)


def call_line(request_id: int, text: str) -> bytes:
    params = {"name": "kitchen_echo", "arguments": {"text": text}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


@pytest.mark.parametrize("stray", [STRAY, STRAY_GROUPED])
async def test_the_stdio_lane_answers_the_call_an_error_and_serves_on(gateway: Gateway, stray: str) -> None:
    frames: list[dict[str, Any]] = []
    answered = anyio.Event()

    async def send(frame: bytes) -> None:
        frames.append(json.loads(frame))
        if len(frames) == 2:
            answered.set()

    await lane_takes_echo(gateway)
    lane = FastLane(gateway, send)
    lane.open, lane.era = True, "session"  # a session-era client past its handshake
    async with anyio.create_task_group() as connection:  # on stdio, the client's connection
        assert lane.take(call_line(1, stray), connection)
        await anyio.sleep(0.1)
        assert lane.take(call_line(2, "next"), connection)
        with anyio.fail_after(10):
            await answered.wait()
    failed, after = sorted(frames, key=lambda frame: frame["id"])
    assert failed == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": types.INTERNAL_ERROR, "message": "tools/call failed in the gateway"},
    }
    assert after["result"]["content"] == [{"type": "text", "text": "next"}]


async def test_one_that_lands_with_the_requests_own_cancel_still_ends_that_request_only() -> None:
    """A cancellation from outside anyio in the same pass as the request's own cancel: the request's scope
    is cancelled, but anyio's scope takes only its own cancellations, so this one must not be let through
    (it would end the connection). The SDK's plain `Server` with the guard, to reach the request's scope."""

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == STRAY:
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            # The dispatcher's scope for this request (anyio keeps no public handle on a task's scope).
            request_scope = _task_states[asyncio.current_task()].cancel_scope  # type: ignore[index]
            loop.call_soon(lambda: (future.cancel(), request_scope.cancel()))
            await future
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    server: Server[Any] = Server("stray", on_call_tool=call_tool, on_list_tools=list_tools)
    server.middleware.append(refusing_stray_cancellations)
    async with Client(server, mode="legacy", read_timeout_seconds=5) as client:
        with pytest.raises(MCPError), anyio.fail_after(5):
            await client.call_tool(STRAY, {})
        with anyio.fail_after(5):
            assert (await client.call_tool("next", {})).content[0].text == "ok"  # type: ignore[union-attr]


async def test_one_that_meets_the_lanes_answer_on_its_way_out_adds_no_second_answer(gateway: Gateway) -> None:
    """The answer was written and its drain met the cancellation: the request has its answer, and gets no
    error after it (one answer per request), and the lane serves on."""
    frames: list[dict[str, Any]] = []
    answered = anyio.Event()

    async def send(frame: bytes) -> None:
        frames.append(json.loads(frame))
        if len(frames) == 1:
            raise asyncio.CancelledError  # as the write's drain, from outside anyio
        answered.set()

    await lane_takes_echo(gateway)
    lane = FastLane(gateway, send)
    lane.open, lane.era = True, "session"
    async with anyio.create_task_group() as connection:
        assert lane.take(call_line(1, "first"), connection)
        await anyio.sleep(0.2)
        assert lane.take(call_line(2, "next"), connection)
        with anyio.fail_after(10):
            await answered.wait()
    assert [frame["id"] for frame in frames] == [1, 2]
    assert [frame["result"]["content"][0]["text"] for frame in frames] == ["first", "next"]


async def test_which_exceptions_count_as_stray_cancellations() -> None:
    cancelled = asyncio.CancelledError("from outside anyio")
    group = BaseExceptionGroup
    # Outside any cancelled scope: any cancellation is stray, alone or grouped, beside errors too.
    assert stray_cancellation(cancelled)
    assert stray_cancellation(group("g", [cancelled]))
    assert stray_cancellation(group("g", [group("inner", [cancelled]), ValueError("x")]))
    # Nothing to do with cancellation, or something that must end the process: not ours to stop.
    assert not stray_cancellation(ValueError("x"))
    assert not stray_cancellation(ExceptionGroup("g", [ValueError("x")]))
    assert not stray_cancellation(KeyboardInterrupt())
    assert not stray_cancellation(group("g", [cancelled, SystemExit(1)]))
    # Inside a cancelled scope: its own cancellation was asked for; one from outside anyio still is not.
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.sleep(1)
        except asyncio.CancelledError as own:
            assert not stray_cancellation(own)
            assert not stray_cancellation(group("g", [own]))
            assert stray_cancellation(cancelled)
            assert stray_cancellation(group("g", [own, cancelled]))
            raise
    assert scope.cancelled_caught  # the checks above ran


async def test_one_met_while_a_server_stops_ends_that_server_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's connection runs in the pool's task group, which every server shares. Once the server was
    up, `Backend._run` re-raised any cancellation, so one nothing asked for (met here while its transport
    closes) went on into that group, which anyio then cancelled: every server's connection and the gateway."""
    original = Backend._open_transport

    async def open_transport(self: Backend, stack: AsyncExitStack, watchers: Any) -> Any:
        opened = await original(self, stack, watchers)
        if self.name == "kitchen":

            async def stray() -> None:
                raise asyncio.CancelledError  # from outside anyio: no scope asked for it

            stack.push_async_callback(stray)  # runs as the connection closes
        return opened

    monkeypatch.setattr(Backend, "_open_transport", open_transport)
    path = tmp_path / "mcp.json"
    servers = {"kitchen": server_entry("kitchen.py"), "numbers": server_entry("numbers.py")}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(tmp_path / "data")}}))
    async with (
        Gateway(load_config(path), serving=True) as gateway,
        Client(McpFront(gateway).server, mode="legacy", read_timeout_seconds=30) as client,
    ):
        with anyio.fail_after(30):
            assert (await client.call_tool("kitchen_echo", {"text": "up"})).content[0].text == "up"  # type: ignore[union-attr]
            await client.call_tool("numbers_add", {"a": 1, "b": 2})
        with anyio.fail_after(15):
            await gateway.pool["kitchen"].stop()
            after = await client.call_tool("numbers_add", {"a": 2, "b": 2})
        assert after.content[0].text == "4.0"  # type: ignore[union-attr]
        assert gateway.pool["kitchen"].state == "stopped"
