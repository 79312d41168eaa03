"""A session's resource subscriptions end with the session: the gateway forgets them and unsubscribes
at the server once no other client holds them, whether the session ended with DELETE or its client
vanished and the session idled out. Before, every URI a client ever subscribed to stayed in the
gateway's table and subscribed at its server for as long as the gateway ran.

Resource subscriptions are a session-era feature (a 2026-07-28 client subscribes on a
`subscriptions/listen` stream, which the gateway releases when the stream closes)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.conftest import http_gateway_url, server_entry, write_gateway_config

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("released")
    servers = {"watched": server_entry("watched.py", protocol="legacy")}
    # Idle sessions expire after a second: a client that vanished is let go of quickly.
    config = write_gateway_config(folder, servers, expose=["direct"], session_idle_timeout=1)
    with http_gateway_url(config) as url:
        yield url


async def subscribed_at_server(url: str) -> list[str]:
    async with Client(url, mode="legacy") as client:
        result = await client.call_tool("watched_subscribed", {})
        assert isinstance(result.content[0], types.TextContent)
        return json.loads(result.content[0].text)  # type: ignore[no-any-return]


async def until_subscribed(url: str, expected: list[str]) -> None:
    """Wait (a few seconds at most) until the server holds exactly `expected`: it is told after the session ends."""
    held: list[str] = []
    with anyio.move_on_after(10):
        while (held := await subscribed_at_server(url)) != expected:
            await anyio.sleep(0.1)
    assert held == expected


async def test_a_session_that_ends_releases_its_subscriptions(url: str) -> None:
    first, second = "watched+watched://item/ends-1", "watched+watched://item/ends-2"
    async with Client(url, mode="legacy") as keeper:
        await keeper.subscribe_resource(second)
        async with Client(url, mode="legacy") as client:
            await client.subscribe_resource(first)
            await client.subscribe_resource(second)
            assert await subscribed_at_server(url) == ["watched://item/ends-1", "watched://item/ends-2"]
        # The other session still holds the second: only the first is released.
        await until_subscribed(url, ["watched://item/ends-2"])
    await until_subscribed(url, [])


async def test_a_session_whose_client_vanished_releases_its_subscriptions(url: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "gone", "version": "1"}},
    }
    async with httpx.AsyncClient(timeout=10) as http:
        opened = await http.post(url, json=initialize, headers=HEADERS)
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        subscribe = {"method": "resources/subscribe", "params": {"uri": "watched+watched://item/vanished"}}
        answer = await http.post(url, json={"jsonrpc": "2.0", "id": 2, **subscribe}, headers=session)
        assert '"result"' in answer.text, answer.text  # the answer comes as an event stream
    # Gone without a DELETE: its session idles out, and what it held goes with it.
    await until_subscribed(url, [])
