"""A session's resource subscriptions end with the session: the gateway forgets them and unsubscribes
at the server once no other client holds them, whether the session ended with DELETE or its client
vanished and the session idled out. Before, every URI a client ever subscribed to stayed in the
gateway's table and subscribed at its server for as long as the gateway ran.

Resource subscriptions are a session-era feature; a 2026-07-28 client subscribes on a
`subscriptions/listen` stream, which the gateway releases when the stream closes."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_manifold._runtime.back_channel import MAX_SUBSCRIBED_URI, MAX_SUBSCRIPTIONS
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


async def test_a_listen_stream_that_ends_releases_its_subscriptions(url: str) -> None:
    """A 2026-07-28 client's stream ends by being cancelled (it closed it, or went away): its resources were
    left subscribed at their servers for good, since nothing could be awaited in the cancelled stream."""
    uris = ["watched+watched://item/listened-1", "watched+watched://item/listened-2"]
    async with Client(url, mode="auto") as client, client.listen(resource_subscriptions=uris):
        assert await subscribed_at_server(url) == ["watched://item/listened-1", "watched://item/listened-2"]
    await until_subscribed(url, [])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_holds_a_bounded_number_of_subscriptions_of_bounded_length(url: str, mode: str) -> None:
    """A subscription is held for as long as its client stays, and a 2026-07-28 server is sent all of its
    subscribed URIs again at each change: unbounded, one client's 2,000 long URIs took the gateway to 620 MB."""
    uris = [f"watched+watched://item/held-{mode}-{n}" for n in range(MAX_SUBSCRIPTIONS + 1)]
    async with Client(url, mode=mode) as client:
        if mode == "auto":
            # 2026-07-28: a listen stream naming more than one client may hold is refused whole.
            over = rf"names {MAX_SUBSCRIPTIONS + 1} resources: .* {MAX_SUBSCRIPTIONS} at most"
            with pytest.raises(MCPError, match=over):
                async with client.listen(resource_subscriptions=uris):
                    pass
            async with client.listen(resource_subscriptions=uris[:2]) as stream:  # the stream still works
                assert stream.honored.resource_subscriptions == uris[:2]
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the SDK marks resources/subscribe deprecated in 2026-07-28
                too_long = "watched+watched://item/" + "x" * MAX_SUBSCRIBED_URI
                long_refused = rf"URI of {len(too_long):,} characters: .* at most {MAX_SUBSCRIBED_URI:,}"
                with pytest.raises(MCPError, match=long_refused):
                    await client.subscribe_resource(too_long)
                for uri in uris[:MAX_SUBSCRIPTIONS]:
                    await client.subscribe_resource(uri)
                with pytest.raises(MCPError, match=f"holds {MAX_SUBSCRIPTIONS} subscriptions, the most one client"):
                    await client.subscribe_resource(uris[-1])
                await client.subscribe_resource(uris[0])  # one it holds is taken again
                await client.unsubscribe_resource(uris[0])
                await client.subscribe_resource(uris[-1])  # a place was freed
        result = await client.call_tool("watched_subscribed", {})
        assert not result.is_error
    await until_subscribed(url, [])


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # resources/subscribe
async def test_a_server_without_a_prefix_cannot_update_another_servers_resource(tmp_path: Any) -> None:
    """A server without a prefix (session-era: it may send updates unasked) sends `resources/updated`
    for `kitchen+kitchen://text`, a URI in server kitchen's namespace: its subscribers heard of an update
    kitchen never made. Now it is dropped; kitchen's own update, sent after it on the same stream, is the
    first they hear (in both client modes)."""
    kitchen = server_entry("kitchen.py")
    config = write_gateway_config(
        tmp_path, {"kitchen": kitchen, "bare": {**kitchen, "prefix": "", "protocol": "legacy"}}
    )
    with http_gateway_url(config) as url:
        for mode in ("auto", "legacy"):
            heard: list[str] = []

            async def on_message(message: Any, heard: list[str] = heard) -> None:
                if isinstance(message, types.ResourceUpdatedNotification):
                    heard.append(str(message.params.uri))

            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(url, mode=mode, message_handler=on_message))
                uris = ["kitchen+kitchen://text", "kitchen+kitchen://blob"]
                if mode == "legacy":
                    for uri in uris:
                        await client.subscribe_resource(uri)
                    events = _updates_heard(heard)
                else:
                    events = _updates_on(await stack.enter_async_context(client.listen(resource_subscriptions=uris)))
                await client.call_tool("touch", {"uri": "kitchen+kitchen://text"})  # bare's forgery
                await client.call_tool("kitchen_touch", {"uri": "kitchen://blob"})  # kitchen's own, after it
                await client.call_tool("kitchen_touch", {"uri": "kitchen://text"})
                with anyio.fail_after(10):
                    assert [await events.__anext__(), await events.__anext__()] == uris[::-1]


async def _updates_heard(heard: list[str]) -> AsyncIterator[str]:
    """The URIs of a session's resource updates, one by one as they come."""
    seen = 0
    while True:
        while len(heard) == seen:
            await anyio.sleep(0.02)
        seen += 1
        yield heard[seen - 1]


async def _updates_on(stream: Any) -> AsyncIterator[str]:
    """The URIs of a listen stream's resource updates."""
    async for event in stream:
        if hasattr(event, "uri"):
            yield event.uri
