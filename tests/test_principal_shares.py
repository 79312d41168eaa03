"""What one principal may hold of what every client shares: its share of the HTTP sessions
(`principal_max_sessions`), so that one credential cannot take all of `max_http_sessions` from the others.

A real gateway over HTTP with two API keys; raw HTTP where the point is what a client that never ends its
sessions does, the SDK's client (both modes) for what a well-behaved one sees.
"""

from __future__ import annotations

import hashlib
import json
import signal
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import free_port, gateway_over_http, keyed_client, server_entry

pytestmark = pytest.mark.anyio

KEYS = {"mallory": "mallory-shares-key-0123456789", "alice": "alice-shares-key-0123456789"}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("shares")
    config = tmp / "mcp.json"
    keys = {name: {"sha256": hashlib.sha256(key.encode()).hexdigest()} for name, key in KEYS.items()}
    settings = {"data_dir": str(tmp / "data"), "log_level": "error", "max_http_sessions": 4}
    settings["principal_max_sessions"] = 2
    servers = {"numbers": server_entry("numbers.py")}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": settings, "auth": {"api_keys": keys}}))
    port = free_port()
    with gateway_over_http(config, port):
        yield f"http://127.0.0.1:{port}/mcp"


def auth(principal: str) -> dict[str, str]:
    return {**HEADERS, "Authorization": f"Bearer {KEYS[principal]}"}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_one_principal_holds_only_its_share_of_the_sessions(url: str, mode: str) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = [await http.post(url, json=INITIALIZE, headers=auth("mallory")) for _ in range(2)]
        assert [response.status_code for response in opened] == [200, 200]
        refused = await http.post(url, json=INITIALIZE, headers=auth("mallory"))
        assert refused.status_code == 429, refused.text
        message = refused.json()["error"]["message"]
        assert "principal 'mallory' already has 2 open session(s) (principal_max_sessions 2)" in message, message
        assert "mcp-session-id" not in refused.headers

        # Before, mallory could open all of max_http_sessions, and alice got 503 "Too many open sessions".
        async with keyed_client(url, KEYS["alice"], mode) as alice:
            assert text_of(await alice.call_tool("numbers_add", {"a": 2, "b": 3})) == "5.0"

        # Mallory's 2026-07-28 requests open no session: its share does not stand in their way.
        async with keyed_client(url, KEYS["mallory"], "auto") as modern:
            if modern.protocol_version == "2026-07-28":
                assert text_of(await modern.call_tool("numbers_add", {"a": 1, "b": 1})) == "2.0"

        # A session it ends gives its place back.
        first = opened[0].headers["mcp-session-id"]
        ended = await http.delete(url, headers={**auth("mallory"), "mcp-session-id": first})
        assert ended.status_code < 300, ended.text
        again = await http.post(url, json=INITIALIZE, headers=auth("mallory"))
        assert again.status_code == 200, again.text
        for response in (opened[1], again):  # leave the next test the share this one found
            await http.delete(url, headers={**auth("mallory"), "mcp-session-id": response.headers["mcp-session-id"]})


async def test_a_protocol_version_sent_twice_opens_no_session_past_the_share(url: str) -> None:
    """The SDK reads a request's first `MCP-Protocol-Version`: a session-era one opens a session, whatever
    follows. The share read every one, and took a 2026-07-28 one after it for a request that opens none, so
    mallory opened as many sessions as she liked (all of `max_http_sessions`: alice got 503)."""
    twice = [*auth("mallory").items(), ("MCP-Protocol-Version", "2025-11-25"), ("MCP-Protocol-Version", "2026-07-28")]
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = [await http.post(url, json=INITIALIZE, headers=twice) for _ in range(3)]
        assert [response.status_code for response in opened] == [200, 200, 429], [r.text for r in opened]
        assert "principal 'mallory' already has 2 open session(s)" in opened[2].json()["error"]["message"]
        for response in opened[:2]:  # leave the next test the share this one found
            await http.delete(url, headers={**auth("mallory"), "mcp-session-id": response.headers["mcp-session-id"]})


async def test_one_principal_holds_only_its_share_of_the_listen_streams(url: str) -> None:
    """2026-07-28 has no sessions; its standing streams are counted like them. Before, one principal could
    hold all the SDK's 1024, and every other client's stream was refused."""
    async with keyed_client(url, KEYS["mallory"], "auto") as mallory, AsyncExitStack() as streams:
        assert mallory.protocol_version == "2026-07-28"
        for _ in range(2):
            await streams.enter_async_context(mallory.listen(tools_list_changed=True))
        with pytest.raises(MCPError) as caught:
            async with mallory.listen(tools_list_changed=True):
                pass
        message = caught.value.error.message
        assert "principal 'mallory' already has 2 stream(s) open (principal_max_sessions 2)" in message, message

        async with keyed_client(url, KEYS["alice"], "auto") as alice, alice.listen(tools_list_changed=True) as stream:
            assert stream is not None  # another principal's share is its own
        assert text_of(await mallory.call_tool("numbers_add", {"a": 1, "b": 2})) == "3.0"  # calls are not streams

        await streams.aclose()  # closed streams give their places back, once the gateway sees them gone
        reopened = False
        with anyio.move_on_after(10):
            while not reopened:
                try:
                    async with mallory.listen(tools_list_changed=True):
                        reopened = True
                except MCPError:
                    await anyio.sleep(0.1)
        assert reopened


async def test_sessions_of_a_removed_key_leave_its_principal_their_share(tmp_path: Path) -> None:
    """A leaked key's sessions outlive its removal (nothing can use them any more), and kept their principal's
    share: alice's other key got 429 until they idled out (`session_idle_timeout`, 30 minutes by default)."""
    leaked, spare = "alice-leaked-key-0123456789", "alice-spare-key-0123456789"
    config = tmp_path / "mcp.json"

    def save(*keys: str) -> None:
        settings = {"data_dir": str(tmp_path / "data"), "log_level": "error", "reload": False}
        api_keys = {"alice": {"sha256": [hashlib.sha256(key.encode()).hexdigest() for key in keys]}}
        data = {"mcpServers": {}, "manifold": settings | {"principal_max_sessions": 2}, "auth": {"api_keys": api_keys}}
        config.write_text(json.dumps(data))

    def bearer(key: str) -> dict[str, str]:
        return {**HEADERS, "Authorization": f"Bearer {key}"}

    save(leaked, spare)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with gateway_over_http(config, port) as process:
        async with httpx2.AsyncClient(timeout=30) as http:
            opened = [await http.post(url, json=INITIALIZE, headers=bearer(leaked)) for _ in range(2)]
            assert [response.status_code for response in opened] == [200, 200]
            save(spare)
            process.send_signal(signal.SIGHUP)
            with anyio.fail_after(20):
                while (await http.post(url, json=INITIALIZE, headers=bearer(leaked))).status_code != 401:
                    await anyio.sleep(0.05)
            opening = await http.post(url, json=INITIALIZE, headers=bearer(spare))
            assert opening.status_code == 200, opening.text  # was 429: "principal 'alice' already has 2"


async def test_sessions_and_streams_of_a_revoked_token_leave_its_principal_their_share(tmp_path: Path) -> None:
    """`auth.revoked` naming one token (`jti:`) left the sessions it opened counted: its principal's fresh token got
    429 until they idled out, as a removed key's sessions once did. Its idle listen streams (2026-07-28) kept their
    places too, until an event came: the fresh token's stream was refused."""
    from tests.test_security import Issuer

    issuer, port, config = Issuer(), free_port(), tmp_path / "mcp.json"
    url = f"http://127.0.0.1:{port}/mcp"
    leaked, fresh = (issuer.token(url, sub="erin", jti=jti) for jti in ("t-1", "t-2"))

    def bearer(token: str) -> dict[str, str]:
        return {**HEADERS, "Authorization": f"Bearer {token}"}

    with issuer.serve() as jwks_url:

        def save(revoked: list[str]) -> None:
            settings = {"data_dir": str(tmp_path / "data"), "log_level": "error", "reload": False}
            oauth = {"issuer": issuer.url, "jwks_url": jwks_url, "resource_url": url}
            data = {
                "mcpServers": {},
                "manifold": settings | {"principal_max_sessions": 2},
                "auth": {"oauth": oauth, "revoked": revoked},
            }
            config.write_text(json.dumps(data))

        save([])
        with gateway_over_http(config, port) as process:
            async with httpx2.AsyncClient(timeout=30) as http, AsyncExitStack() as held:
                opened = [await http.post(url, json=INITIALIZE, headers=bearer(leaked)) for _ in range(2)]
                assert [response.status_code for response in opened] == [200, 200]
                leakers = await held.enter_async_context(keyed_client(url, leaked, "auto"))
                leaked_streams = [await held.enter_async_context(leakers.listen(tools_list_changed=True)) for _ in "ab"]
                save(["jti:t-1"])
                process.send_signal(signal.SIGHUP)
                with anyio.fail_after(20):
                    while (await http.post(url, json=INITIALIZE, headers=bearer(leaked))).status_code != 401:
                        await anyio.sleep(0.05)
                opening = await http.post(url, json=INITIALIZE, headers=bearer(fresh))
                assert opening.status_code == 200, opening.text  # was 429: "principal 'oauth:erin' already has 2"
                async with keyed_client(url, fresh, "auto") as erin, erin.listen(tools_list_changed=True) as stream:
                    assert stream is not None  # was refused: "already has 2 stream(s) open"
                with anyio.fail_after(10):  # and the revoked token's idle streams have ended, gracefully
                    assert [[event async for event in leaked] for leaked in leaked_streams] == [[], []]
