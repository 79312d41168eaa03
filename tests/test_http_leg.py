"""The raw HTTP leg (`_runtime/http_leg.py`) against kitchen.py served by the SDK's own streamable HTTP server.

Which failures are sent again: one before the request can have reached the server (no connection) is
retried on a fresh connection; one after the server got it (the answer broke off) is not, because the
tool may have run. The transport under the leg's httpx client is the real one, wrapped to fail once
where a network would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)

from mcp_manifold._errors import BackendUnavailable
from mcp_manifold._runtime.http_leg import HttpLeg, refused_status, result_of
from mcp_manifold._sdk import HTTP_KEEPALIVE
from tests.conftest import free_port, gateway_over_http, server_over_http

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
SESSION = "2025-11-25"


@pytest.fixture(scope="module")
def kitchen_url() -> Iterator[str]:
    with server_over_http("kitchen.py", timeout=60) as url:
        yield url


class FailingOnce(httpx2.AsyncBaseTransport):
    """The real transport, but the first request fails: before it is sent (`before=True`), or after the
    server answered it, as if the connection broke while the answer was read."""

    def __init__(self, before: bool) -> None:
        self.real = httpx2.AsyncHTTPTransport()
        self.before = before
        self.reached_server = 0
        self.failed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not self.failed and self.before:
            self.failed = True
            raise httpx2.ConnectError("connection refused", request=request)
        response = await self.real.handle_async_request(request)
        self.reached_server += 1
        if not self.failed:
            self.failed = True
            await response.aclose()
            raise httpx2.ReadError("connection reset by peer", request=request)
        return response

    async def aclose(self) -> None:
        await self.real.aclose()


def modern_call(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    params = {
        "name": name,
        "arguments": arguments,
        "_meta": {
            PROTOCOL_VERSION_META_KEY: MODERN,
            CLIENT_CAPABILITIES_META_KEY: {},
            CLIENT_INFO_META_KEY: {"name": "test", "version": "1"},
        },
    }
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
    return params, headers


async def test_a_connection_that_failed_before_sending_is_retried(kitchen_url: str) -> None:
    transport = FailingOnce(before=True)
    async with httpx2.AsyncClient(transport=transport) as client:
        leg = HttpLeg(client, kitchen_url, "kitchen")
        result = await leg.post("tools/call", *modern_call("echo", {"text": "again"}))
    assert result is not None and result["content"] == [{"type": "text", "text": "again"}]
    assert (leg.retries, leg.posts, transport.reached_server) == (1, 1, 1)


async def test_an_answer_that_broke_off_is_not_retried(kitchen_url: str) -> None:
    transport = FailingOnce(before=False)
    async with httpx2.AsyncClient(transport=transport) as client:
        leg = HttpLeg(client, kitchen_url, "kitchen")
        with pytest.raises(BackendUnavailable, match="broke off"):
            await leg.post("tools/call", *modern_call("echo", {"text": "once"}))
        # The server got it once; the leg did not send it again, and the next call goes on.
        assert (leg.retries, leg.posts, transport.reached_server) == (0, 0, 1)
        result = await leg.post("tools/call", *modern_call("echo", {"text": "next"}))
    assert result is not None and result["content"] == [{"type": "text", "text": "next"}]


async def test_a_refusal_is_answered_as_the_sdk_answers_it(kitchen_url: str) -> None:
    async with httpx2.AsyncClient() as client:
        # A session the server does not know: its 404 carries a JSON-RPC error, which the SDK's client
        # surfaces as the server's error; so does the leg.
        leg = HttpLeg(client, kitchen_url, "kitchen")
        leg.session_id = "gone"
        headers = {"mcp-protocol-version": "2025-11-25"}
        with pytest.raises(MCPError, match="Session not found"):
            await leg.post("tools/call", {"name": "echo", "arguments": {"text": "x"}}, headers)
        # A 404 with no JSON-RPC in it: the server did not take the request; the SDK's path sends it.
        lost = HttpLeg(client, kitchen_url + "/elsewhere", "kitchen")
        assert await lost.post("tools/call", *modern_call("echo", {"text": "x"})) is None
        assert (lost.fallbacks, lost.posts) == (1, 0)


async def test_a_log_in_the_answers_stream_reaches_the_session(kitchen_url: str) -> None:
    delivered: list[tuple[str, Any]] = []

    async def deliver(method: str, params: Any) -> None:
        delivered.append((method, params))

    async def refuse(request_id: Any, method: str, params: Any) -> dict[str, Any]:
        raise MCPError(-32601, "Method not found")

    async with httpx2.AsyncClient() as client:
        leg = HttpLeg(client, kitchen_url, "kitchen")
        leg.opened(deliver, refuse)
        params, headers = modern_call("log", {"message": "on the way", "level": "warning"})
        params["_meta"][LOG_LEVEL_META_KEY] = "debug"  # the server then answers with an SSE stream
        result = await leg.post("tools/call", params, headers)
    assert result is not None and result["content"] == [{"type": "text", "text": "logged"}]
    assert [(method, params["data"]) for method, params in delivered] == [("notifications/message", "on the way")]


async def test_a_question_in_a_sessions_answer_stream_is_answered_by_the_session(kitchen_url: str) -> None:
    async with httpx2.AsyncClient(timeout=60) as client:
        leg = HttpLeg(client, kitchen_url, "kitchen")
        await open_session(client, kitchen_url, leg, {"elicitation": {}})
        asked: list[tuple[str, Any]] = []

        async def deliver(method: str, params: Any) -> None:
            pass

        async def answer(request_id: Any, method: str, params: Any) -> dict[str, Any]:
            asked.append((method, params["message"]))
            return {"action": "accept", "content": {"answer": "blue"}}

        leg.opened(deliver, answer)
        params = {"name": "elicit", "arguments": {"question": "colour?"}}
        result = await leg.post("tools/call", params, {"mcp-protocol-version": SESSION})
    assert asked == [("elicitation/create", "colour?")]
    assert result is not None and result["content"] == [{"type": "text", "text": "accepted: blue"}]


async def test_sse_events_are_read_as_the_spec_frames_them() -> None:
    """The leg's answer from a stream: only `message` events count, their data lines joined; a comment, an
    event of another type and a message for another request are passed over."""
    lines = [": a comment", "event: other", 'data: {"jsonrpc": "2.0", "id": "r1", "result": {"wrong": 1}}', ""]
    lines += ['data: {"jsonrpc": "2.0", "id": "r0", "result": {}}', ""]
    lines += ["event: message", "id: 1", 'data: {"jsonrpc": "2.0", "id": "r1",', 'data: "result": {"a": 1}}', ""]
    body = ("\n".join(lines) + "\n").encode()
    request = httpx2.Request("POST", "http://127.0.0.1:9/mcp")
    response = httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body, request=request)
    async with httpx2.AsyncClient() as client:
        leg = HttpLeg(client, "http://127.0.0.1:9/mcp", "kitchen")
        assert await leg._read_stream(response, "r1") == {"a": 1}


def test_errors_are_read_as_the_sdk_reads_them() -> None:
    with pytest.raises(MCPError, match="nope") as caught:
        result_of({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "nope"}})
    assert caught.value.error.code == -32602
    assert result_of({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}) == {"content": []}
    assert refused_status(404, None) is None  # the SDK's path answers it
    assert refused_status(401, None) is None
    assert refused_status(502, None) is not None  # it may have run: answered as the SDK does
    error = refused_status(400, {"code": -32602, "message": "bad"})
    assert error is not None and error.error.message == "bad"


async def open_session(
    client: httpx2.AsyncClient, url: str, leg: HttpLeg, capabilities: dict[str, Any] | None = None
) -> None:
    """A session-era session opened as the SDK's client opens it, through the leg's client (which notes its id)."""
    opening = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": SESSION,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    (await client.post(url, json=opening, headers=base)).raise_for_status()
    assert leg.session_id is not None
    headers = {**base, "mcp-session-id": leg.session_id, "mcp-protocol-version": SESSION}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.post(url, json=initialized, headers=headers)).status_code == 202


async def test_an_answer_stream_closed_before_its_answer_is_resumed() -> None:
    """A server that closes the call's stream and answers later (SEP-1699 polling, the SDK's event store):
    the leg comes back with `Last-Event-ID` after the server's retry interval and reads the answer there,
    and the tool ran once."""
    with server_over_http("polling.py", timeout=60) as url:
        async with httpx2.AsyncClient(timeout=60) as client:
            leg = HttpLeg(client, url, "polling")
            await open_session(client, url, leg)
            leg.opened(lambda method, params: _nothing(), _refuse)
            headers = {"mcp-protocol-version": SESSION}
            result = await leg.post("tools/call", {"name": "later", "arguments": {"text": "resumed"}}, headers)
            assert result is not None and result["content"] == [{"type": "text", "text": "resumed"}]
            assert leg.resumed == 1
            closes = await leg.post("tools/call", {"name": "closes", "arguments": {}}, headers)
            assert closes is not None and closes["content"][0]["text"] == "1"


async def test_a_stream_that_ends_without_its_answer_fails_that_call_saying_so() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1:9/mcp", headers={"mcp-session-id": "s1"})
    ended = "\n".join(['data: {"jsonrpc": "2.0", "id": "r0", "result": {}}', "", ""]).encode()
    resumable = "\n".join(["id: 7", "retry: 10", "data: ", "", ""]).encode()
    async with httpx2.AsyncClient() as client:
        leg = HttpLeg(client, f"http://127.0.0.1:{free_port()}/mcp", "kitchen")  # nothing listens there
        response = httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=ended, request=request)
        with pytest.raises(BackendUnavailable, match="ended without the answer"):
            await leg._read_stream(response, "r1")
        # With an event id to resume from, it tries twice (the SDK client's count), then says so.
        response = httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=resumable, request=request
        )
        with pytest.raises(BackendUnavailable, match="resuming it failed 2 times"):
            await leg._read_stream(response, "r1")
        assert leg.resumed == 0


async def _nothing() -> None:
    pass


async def _refuse(request_id: Any, method: str, params: Any) -> dict[str, Any]:
    raise MCPError(-32601, "Method not found")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_polling_servers_calls_are_answered_through_the_gateway(tmp_path: Path, mode: str) -> None:
    with server_over_http("polling.py", timeout=60) as backend:
        servers = {"poll": {"url": backend, "protocol": "legacy"}}
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(tmp_path / "data")}}))
        port = free_port()
        with gateway_over_http(config, port, timeout=60):
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(url, mode=mode, cache=None) as client:
                await client.call_tool("poll_closes", {})  # (a client's first call may take the SDK server's path)
                for turn in range(1, 3):
                    before = raw_leg_calls(port)
                    result = await client.call_tool("poll_later", {"text": f"turn {turn}"})
                    assert result.content == [types.TextContent(type="text", text=f"turn {turn}")], result
                    assert raw_leg_calls(port) == before + 1  # it went on the leg, and was resumed there
                counted = await client.call_tool("poll_closes", {})
                assert counted.content == [types.TextContent(type="text", text="2")]  # each ran once


def leg_clients(port: int, server: str) -> float:
    metrics = httpx2.get(f"http://127.0.0.1:{port}/metrics").text
    found = re.search(rf'manifold_backend_raw_leg_clients\{{server="{server}"\}} (\S+)', metrics)
    assert found is not None, metrics
    return float(found.group(1))


def raw_leg_calls(port: int, server: str = "poll") -> float:
    metrics = httpx2.get(f"http://127.0.0.1:{port}/metrics").text
    found = re.search(rf'manifold_backend_raw_leg_calls_total\{{server="{server}"\}} (\S+)', metrics)
    assert found is not None, metrics
    return float(found.group(1))


class Recording(httpx2.AsyncBaseTransport):
    """The real transport, noting the `Cookie` header of each request that passes, and how many were in
    flight at once (on every `Recording` together: `in_flight`)."""

    in_flight: ClassVar[list[int]] = [0, 0]  # now, most

    def __init__(self) -> None:
        self.real = httpx2.AsyncHTTPTransport()
        self.cookies: list[str | None] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.cookies.append(request.headers.get("cookie"))
        counts = Recording.in_flight
        counts[0] += 1
        counts[1] = max(counts)
        try:
            response = await self.real.handle_async_request(request)
            await response.aread()  # the answer whole, so that the request is over when this returns
            return response
        finally:
            counts[0] -= 1

    async def aclose(self) -> None:
        await self.real.aclose()


async def test_many_calls_in_flight_spread_over_a_few_clients_that_share_the_sessions_cookies(
    kitchen_url: str,
) -> None:
    """httpcore checks every idle connection of a pool whenever a request starts or ends, so the leg keeps
    its pools small: past a few calls in flight on one client it opens another like it, with the session's
    cookie jar (a sticky load balancer's cookie reaches the same replica on every client)."""
    transports: list[Recording] = []
    opened: list[httpx2.AsyncClient] = []

    def recording_client(cookies: Any = None) -> httpx2.AsyncClient:
        transports.append(Recording())
        return httpx2.AsyncClient(transport=transports[-1], cookies=cookies, timeout=60)

    async with recording_client() as session_client:
        session_client.cookies.set("lb", "replica-2")

        async def open_client() -> httpx2.AsyncClient:
            opened.append(recording_client(session_client.cookies.jar))
            return opened[-1]

        try:
            one_at_a_time = HttpLeg(session_client, kitchen_url, "kitchen", open_client=open_client)
            for turn in range(6):
                result = await one_at_a_time.post("tools/call", *modern_call("echo", {"text": f"one {turn}"}))
                assert result is not None and result["content"] == [{"type": "text", "text": f"one {turn}"}]
            assert one_at_a_time.clients == 1 and not opened  # calls one at a time keep to the session's client

            leg = HttpLeg(session_client, kitchen_url, "kitchen", open_client=open_client)
            answers: dict[int, Any] = {}

            async def call(number: int) -> None:
                answers[number] = await leg.post("tools/call", *modern_call("slow", {"seconds": 0.5}))

            async with anyio.create_task_group() as calls:
                for number in range(20):
                    calls.start_soon(call, number)
            assert all(answer is not None and answer["content"][0]["text"] for answer in answers.values())
            assert len(answers) == 20 and leg.posts == 20
            assert leg.clients == 5  # four calls in flight on each
            posted = [cookie for transport in transports for cookie in transport.cookies]
            assert len(posted) == 26 and set(posted) == {"lb=replica-2"}
        finally:
            for client in opened:
                await client.aclose()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_many_calls_in_flight_to_an_http_server_are_each_answered_through_the_gateway(
    tmp_path: Path, kitchen_url: str, mode: str
) -> None:
    """The gateway's own leg opens its extra clients as it opens the session's (`create_http_client`)."""
    config = tmp_path / "mcp.json"
    servers = {"kitchen": {"url": kitchen_url}}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(tmp_path / "data")}}))
    port = free_port()
    with gateway_over_http(config, port, timeout=60):
        async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode, cache=None) as client:
            await client.call_tool("kitchen_echo", {"text": "first"})  # (a first call may take the SDK's path)
            before = raw_leg_calls(port, "kitchen")
            answers: dict[int, str] = {}

            async def call(number: int) -> None:
                await client.call_tool("kitchen_slow", {"seconds": 0.5})  # many in flight at once
                result = await client.call_tool("kitchen_echo", {"text": f"call {number}"})
                answers[number] = result.content[0].text  # type: ignore[union-attr]

            async with anyio.create_task_group() as calls:
                for number in range(24):
                    calls.start_soon(call, number)
            assert answers == {number: f"call {number}" for number in range(24)}
            assert raw_leg_calls(port, "kitchen") == before + 48
            assert leg_clients(port, "kitchen") > 1  # the gateway's leg opened clients of its own


async def test_all_the_legs_clients_together_carry_no_more_calls_at_once_than_one_pool_did(kitchen_url: str) -> None:
    opened: list[httpx2.AsyncClient] = []

    async def open_client() -> httpx2.AsyncClient:
        opened.append(httpx2.AsyncClient(transport=Recording(), timeout=60))
        return opened[-1]

    Recording.in_flight[:] = [0, 0]
    async with httpx2.AsyncClient(transport=Recording(), timeout=60) as session_client:
        leg = HttpLeg(session_client, kitchen_url, "kitchen", open_client=open_client)
        try:
            async with anyio.create_task_group() as calls:
                for _ in range(HTTP_KEEPALIVE + 20):
                    calls.start_soon(leg.post, "tools/call", *modern_call("slow", {"seconds": 0.5}))
        finally:
            for client in opened:
                await client.aclose()
    assert leg.posts == HTTP_KEEPALIVE + 20 and leg.clients == 8
    assert Recording.in_flight[1] == HTTP_KEEPALIVE  # the rest waited their turn
