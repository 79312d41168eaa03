"""The raw stdio leg (`_runtime/stdio_leg.py`): a plain `tools/call` written straight to a stdio server's
stdin, its answer picked out of the session's read stream.

Two HTTP gateways with the same config run side by side, one with the leg off (`MANIFOLD_STDIO_LEG=0`);
every request of the HTTP lane's corpus (results, tool errors, unknown tools, bad arguments, large
results, structured content, images) must come back the same bytes from both, in both eras, and
`/metrics` shows which gateway used the leg. Then what the leg must keep from the SDK's path: a log the
server sends before its answer reaches the caller, a server that dies mid-call fails that call and is
started again, and a given-up request's late answer is dropped without reaching the session.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, JSONRPCNotification, JSONRPCResponse

from mcp_manifold._errors import InvalidRequest
from mcp_manifold._runtime.stdio_leg import StdioLeg
from tests.conftest import free_port, manifold_command, stop_process, wait_for_port
from tests.test_http_lane import gateway_config, same_answers

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def two_gateways(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(URL of a gateway with the leg on, URL of one with it off), over HTTP, kitchen.py over stdio."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(leg: bool) -> str:
        port = free_port()
        env = {**os.environ, "MANIFOLD_STDIO_LEG": "1" if leg else "0"}
        name = "leg" if leg else "sdk"
        command = manifold_command(gateway_config(tmp_path, name), "--http", "--port", str(port))
        process = subprocess.Popen(command, env=env, start_new_session=True)
        processes.append(process)
        wait_for_port(port, process, timeout=60)
        return f"http://127.0.0.1:{port}/mcp"

    try:
        yield start(True), start(False)
    finally:
        for process in processes:
            stop_process(process)


def raw_leg_calls(url: str) -> float:
    text = httpx.get(url.removesuffix("/mcp") + "/metrics").text
    found = re.search(r'manifold_backend_raw_leg_calls_total\{server="kitchen"\} (\S+)', text)
    assert found is not None, "the raw-leg counter is missing from /metrics"
    return float(found.group(1))


async def test_a_stdio_backend_answers_alike_on_the_raw_leg(two_gateways: tuple[str, str]) -> None:
    leg_url, sdk_url = two_gateways
    on_leg = same_answers(leg_url, sdk_url)
    # Real answers, not two alike failures.
    status, text = on_leg["modern 6 kitchen_add"]
    assert status == 200 and json.loads(text)["result"]["structuredContent"] == {"result": 42}
    status, text = on_leg["session 12 kitchen_huge"]
    assert len(json.loads(text)["result"]["content"][0]["text"]) == 300_000
    # Both eras' plain calls went on the leg on one gateway, none on the other.
    assert raw_leg_calls(leg_url) >= 20
    assert raw_leg_calls(sdk_url) == 0


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_leg_keeps_what_the_server_says_before_its_answer(two_gateways: tuple[str, str], mode: str) -> None:
    leg_url, _ = two_gateways
    before = raw_leg_calls(leg_url)
    async with Client(leg_url, mode=mode, cache=None) as client:
        for _ in range(2):  # (a client's first call may take the SDK server's path, which makes model calls)
            result = await client.call_tool("kitchen_echo", {"text": f"via {mode}"})
            assert result.content == [types.TextContent(type="text", text=f"via {mode}")]
    assert raw_leg_calls(leg_url) >= before + 1
    # A log message the server writes before its answer is relayed to the client whose call it is.
    logs: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with Client(leg_url, mode="legacy", cache=None, logging_callback=on_log) as client:
        await client.call_tool("kitchen_echo", {"text": "warm"})  # the session's first call: the SDK server's
        before = raw_leg_calls(leg_url)
        result = await client.call_tool("kitchen_log", {"message": "before the answer", "level": "warning"})
        assert result.content == [types.TextContent(type="text", text="logged")]
        assert raw_leg_calls(leg_url) == before + 1  # this call went on the leg
    assert logs == ["before the answer"]


async def test_a_server_that_dies_on_the_leg_fails_that_call_and_is_started_again(
    two_gateways: tuple[str, str],
) -> None:
    leg_url, _ = two_gateways
    async with Client(leg_url, cache=None) as client:
        for _ in range(2):
            assert (await client.call_tool("kitchen_echo", {"text": "before"})).content[0].text == "before"  # type: ignore[union-attr]
        before = raw_leg_calls(leg_url)
        crashed = await client.call_tool("kitchen_crash", {})
        assert raw_leg_calls(leg_url) == before + 1  # it went on the leg
        assert crashed.is_error
        said = crashed.content[0].text  # type: ignore[union-attr]
        assert "closed the connection" in said and "crashing now" in said, said
        with anyio.fail_after(30):
            again = await client.call_tool("kitchen_echo", {"text": "after"})
        assert again.content[0].text == "after"  # type: ignore[union-attr]


async def test_a_late_answer_is_dropped_and_an_ended_stream_fails_what_waits() -> None:
    """The leg on its own, over memory streams standing in for the pipes: what it takes out of the session's
    stream, what it leaves in it, and how a request ends when the connection does."""
    stdin_send, stdin_receive = anyio.create_memory_object_stream[bytes](10)
    read_send, read_receive = anyio.create_memory_object_stream[Any](10)
    leg = StdioLeg("kitchen")
    leg.attach(stdin_send)
    session_stream = leg.reading(read_receive)
    async with anyio.create_task_group() as group:
        answers_: list[Any] = []

        async def call() -> None:
            answers_.append(await leg.post("tools/call", {"name": "echo"}, {}))

        group.start_soon(call)
        written = json.loads(await stdin_receive.receive())
        assert written == {"jsonrpc": "2.0", "id": "manifold-1", "method": "tools/call", "params": {"name": "echo"}}
        # Someone else's messages pass on to the session; the leg's answer does not.
        notification = SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={}))
        await read_send.send(notification)
        await read_send.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id="manifold-1", result={"content": []})))
        await read_send.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id="manifold-99", result={})))  # late
        own = SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
        await read_send.send(own)
        assert await session_stream.receive() is notification
        assert await session_stream.receive() is own  # the late answer was dropped on the way
    assert answers_ == [{"content": []}]

    # What no wire carries is refused to its sender, and nothing reaches the server.
    with pytest.raises(InvalidRequest, match="was not sent to server 'kitchen'"):
        await leg.post("tools/call", {"name": "echo", "_meta": {"note": "\ud800"}}, {})
    with pytest.raises(InvalidRequest, match="not a finite number"):
        await leg.post("tools/call", {"name": "echo", "_meta": {"note": float("nan")}}, {})
    with pytest.raises(anyio.WouldBlock):
        stdin_receive.receive_nowait()

    # A request cancelled after it was written tells the server, as the SDK's client does.
    async with anyio.create_task_group() as group:
        group.start_soon(leg.post, "tools/call", {"name": "slow"}, {})
        sent = json.loads(await stdin_receive.receive())["id"]
        group.cancel_scope.cancel()
    cancelled = json.loads(await stdin_receive.receive())
    assert cancelled["method"] == "notifications/cancelled" and cancelled["params"]["requestId"] == sent

    # The stream ends: what waits fails as a closed connection, and so does what comes after.
    failures: list[MCPError] = []

    async def waits() -> None:
        try:
            await leg.post("tools/call", {"name": "echo"}, {})
        except MCPError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(waits)
        await stdin_receive.receive()
        await read_send.aclose()
        with pytest.raises(anyio.EndOfStream):
            await session_stream.receive()
    with pytest.raises(MCPError) as after:
        await leg.post("tools/call", {"name": "echo"}, {})
    assert [failure.error.code for failure in failures] == [CONNECTION_CLOSED]
    assert after.value.error.code == CONNECTION_CLOSED
