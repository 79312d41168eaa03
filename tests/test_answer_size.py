"""A remote (HTTP) server's answer is bounded by `max_answer_bytes`, as a stdio server's lines are.

The gateway read an HTTP server's JSON answer whole, with no bound: a 50 MB answer took it from 79 to
229 MB, and nothing stopped 5 GB. Now an answer past `max_answer_bytes`, counted once decoded (a gzip
answer of a few KiB can be a gigabyte decoded), fails that request alone, on the raw leg (a plain
`tools/call`) and on the SDK's client (everything else, a `resources/read` here); an event stream is read
event by event, so a long one of small events is not cut for its total.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import SERVERS, free_port, gateway_over_http, server_over_http, stop_process, wait_for_port

LIMIT = 256 << 10  # max_answer_bytes here: 256 KiB, so that the answers past it stay small
REFUSED = (
    "server 'bulky': Failed to parse JSON response: the answer is larger than 262144 bytes (max_answer_bytes); it was"
    " not read"
)


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.fixture(scope="module", params=["1", "0"], ids=["leg", "sdk"])
def gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway with `max_answer_bytes` at `LIMIT` in front of bulky (twice: `other` is a second server),
    its plain calls on the raw leg (`leg`) or on the SDK's client (`sdk`): its URL."""
    folder = tmp_path_factory.mktemp("answer_size")
    with server_over_http("bulky.py") as bulky:
        servers = {"bulky": {"url": bulky, "timeout": 10}, "other": {"url": bulky}}
        manifold = {"expose": ["direct"], "max_answer_bytes": LIMIT, "data_dir": str(folder / "data")}
        config = folder / "mcp.json"
        config.write_text(json.dumps({"mcpServers": servers, "manifold": manifold}))
        port = free_port()
        with gateway_over_http(config, port, env={**os.environ, "MANIFOLD_HTTP_LEG": request.param}):
            yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_answer_past_max_answer_bytes_fails_that_call_only(
    gateway: str, mode: str, request: pytest.FixtureRequest
) -> None:
    """A JSON answer of 1 MiB, plain, gzip-encoded (about 1 KiB on the wire) or without a content-length
    (its size known only as it is read), fails that call with an error
    naming the server and the limit; one under the limit, an event stream of 512 KiB (64 KiB events), the
    same server's next call and another server's all answer. On the raw leg and on the SDK's client."""
    async with Client(gateway, mode=mode) as client:
        assert text_of(await client.call_tool("bulky_fine", {})) == "fine"
        for how in ({}, {"gzip": True}, {"chunked": True}):
            refused = await client.call_tool("bulky_big", {"kb": 1024, **how})
            assert refused.is_error and text_of(refused) == REFUSED, (how, text_of(refused)[:300])
            under = await client.call_tool("bulky_big", {"kb": 100, **how})
            assert text_of(under) == "x" * (100 << 10), (how, text_of(under)[:300])
        said = await client.call_tool("bulky_chatty", {"kb": 512})
        assert text_of(said) == "said", text_of(said)[:300]
        assert text_of(await client.call_tool("bulky_fine", {})) == "fine"
        assert text_of(await client.call_tool("other_fine", {})) == "fine"
    async with httpx2.AsyncClient() as http:  # the calls took the path this gateway is for
        scraped = (await http.get(gateway.removesuffix("/mcp") + "/metrics")).text
    on_leg = re.search(r'manifold_backend_raw_leg_calls_total\{server="bulky"\} (\S+)', scraped)
    assert on_leg is not None and (float(on_leg[1]) > 0) == (request.node.callspec.params["gateway"] == "1"), on_leg


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_answer_of_too_many_objects_fails_that_call_only(gateway: str, mode: str) -> None:
    """Parsed, an object costs the gateway about 250 bytes however short on the wire: an answer past 64 KiB
    holding more than one `{` or `[` per 64 bytes of `max_answer_bytes` (4,096 here) fails that call unparsed,
    plain, gzip-encoded or without a content-length, as a stdio server's line does; an answer under 64 KiB is
    not counted, and the same server's next call answers."""
    refused_objects = (
        "server 'bulky': Failed to parse JSON response: the answer holds more than 4096 objects and arrays (one"
        " per 64 bytes of max_answer_bytes); it was not read"
    )
    async with Client(gateway, mode=mode) as client:
        for how in ({}, {"gzip": True}, {"chunked": True}):
            refused = await client.call_tool("bulky_big", {"kb": 100, "objects": True, **how})
            assert refused.is_error and text_of(refused) == refused_objects, (how, text_of(refused)[:300])
            fits = await client.call_tool("bulky_big", {"kb": 40, "objects": True, **how})
            assert not fits.is_error and len(fits.structured_content["items"]) == 10_240, how  # type: ignore[index]
        assert text_of(await client.call_tool("bulky_fine", {})) == "fine"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_read_past_max_answer_bytes_fails_that_read_only(gateway: str, mode: str) -> None:
    """What the raw leg never takes (a `resources/read`) goes through the SDK's client, on the client the
    gateway made: its answer is bounded alike, plain or gzip-encoded, and the session goes on."""
    async with Client(gateway, mode=mode) as client:
        for kind in ("big", "gzip"):
            with pytest.raises(MCPError) as refused:
                await client.read_resource(f"bulky+bulky://{kind}/1024")
            assert str(refused.value) == f"resources/read failed: {REFUSED}", (kind, str(refused.value)[:300])
            read = await client.read_resource(f"bulky+bulky://{kind}/100")
            assert read.contents[0].text == "x" * (100 << 10), kind  # type: ignore[union-attr]
        assert text_of(await client.call_tool("bulky_fine", {})) == "fine"


@pytest.mark.anyio
async def test_an_sse_servers_answer_to_a_post_is_bounded_whatever_its_type(tmp_path: Path) -> None:
    """The SSE transport's client reads the answer to a POST whole (its answers come on the GET stream; a
    server may still send one there). Past the bound the read stops and the log says so; the SDK's client
    then ends the session (as for any POST that fails), so that call fails, and the next is answered on a new
    one. The session's own event stream is left to the SDK's reader. A session-era client: the client's
    era does not reach the backend's transport."""
    port = free_port()
    bulky = subprocess.Popen([sys.executable, str(SERVERS / "bulky.py"), "--sse", str(port)], start_new_session=True)
    try:
        wait_for_port(port, bulky)
        servers = {"bulky": {"url": f"http://127.0.0.1:{port}/sse", "transport": "sse", "timeout": 10}}
        manifold = {"expose": ["direct"], "max_answer_bytes": LIMIT, "ping_interval": 0.5, "data_dir": str(tmp_path)}
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": servers, "manifold": manifold}))
        gateway, log = free_port(), tmp_path / "gateway.log"
        with log.open("wb") as stderr, gateway_over_http(config, gateway, stderr=stderr):
            async with Client(f"http://127.0.0.1:{gateway}/mcp", mode="legacy") as client:
                assert text_of(await client.call_tool("bulky_fine", {})) == "fine"
                refused = await client.call_tool("bulky_big", {"kb": 1024})
                assert refused.is_error, text_of(refused)[:300]
                assert text_of(await client.call_tool("bulky_fine", {})) == "fine"
        said = log.read_text()
        assert "server 'bulky': an answer passed 262144 bytes (max_answer_bytes), not read" in said, said[-2000:]
    finally:
        stop_process(bulky)


def test_the_limit_reads_as_a_person_would() -> None:
    from mcp_manifold._runtime.answer_size import size_words

    assert [size_words(n) for n in (64 << 20, 1 << 20, LIMIT, 1000)] == ["64 MB", "1 MB", "262144 bytes", "1000 bytes"]
