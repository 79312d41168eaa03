"""A tool's answer that merely quotes what a server says when it could not ask its client (`could_not_ask`)
is the tool's answer: it is neither replaced by an error nor made again (the tool did its work once)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from tests.conftest import answer_sampling, free_port, gateway_over_http, server_entry, stdio_gateway

KITCHEN_EXTRAS = {"KITCHEN_EXTRAS": "1"}
QUOTED = "the manual says: Client does not support sampling (required for sampling/createMessage)"


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.anyio
async def test_a_successful_answer_that_quotes_the_sentence_is_not_made_again(tmp_path: Path) -> None:
    """Behind the gateway's shared session, a client that can sample calls a tool with an effect whose
    successful answer quotes the TypeScript SDK's sentence: the tool runs once and its answer comes back."""
    data = tmp_path / "data"
    config = tmp_path / "mcp.json"
    servers = {"kitchen": server_entry("kitchen.py", env=KITCHEN_EXTRAS)}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(data)}}))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with gateway_over_http(config, port, timeout=60, stderr=(tmp_path / "gateway.log").open("wb")):
        async with Client(url, mode="legacy", sampling_callback=answer_sampling) as can_sample:
            notes = tmp_path / "notes.txt"
            first = await can_sample.call_tool("kitchen_note", {"text": QUOTED, "path": str(notes)})
            assert not first.is_error, text_of(first)
            assert text_of(first) == QUOTED
            assert notes.read_text().splitlines() == [QUOTED]  # the tool ran once


@pytest.mark.anyio
async def test_a_modern_servers_successful_answer_that_quotes_the_sentence_is_kept(write_config: Any) -> None:
    """A 2026-07-28 server's successful answer that quotes "Cannot send ...: no back-channel" is passed on
    as it is, not turned into the gateway's error about a server that asks mid-call."""
    quoted = "log: Cannot send 'roots/list': this transport context has no back-channel"
    config = write_config({"kitchen": server_entry("kitchen.py", protocol="modern")})
    async with stdio_gateway(config) as client:
        echoed = await client.call_tool("kitchen_echo", {"text": quoted})
    assert not echoed.is_error, text_of(echoed)
    assert text_of(echoed) == quoted


@pytest.mark.anyio
async def test_a_server_that_speaks_only_2026_07_28_is_not_switched_to_the_handshake_by_a_quote(
    tmp_path: Path,
) -> None:
    """A 2026-07-28-only server (it refuses the handshake) whose successful answer quotes the sentence to a
    client that can sample: the gateway does not learn to reach it with the handshake, which would end it
    for every client (and for good: what it learns is kept)."""
    data = tmp_path / "data"
    config = tmp_path / "mcp.json"
    servers = {"modern": server_entry("modern_only.py")}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(data)}}))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    quoted = "Cannot send 'sampling/createMessage': this transport context has no back-channel"
    with gateway_over_http(config, port, timeout=60, stderr=(tmp_path / "gateway.log").open("wb")):
        async with Client(url, mode="legacy", sampling_callback=answer_sampling) as can_sample:
            await can_sample.call_tool("modern_echo", {"text": quoted})
        async with Client(url, mode="legacy") as other:
            after = await other.call_tool("modern_echo", {"text": "still there"})
            assert not after.is_error and text_of(after) == "still there", text_of(after)
    assert not (data / "learned.json").exists() or "needs_session" not in (data / "learned.json").read_text()


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("Sampling not supported or error: Client does not support sampling (required for ...)", True),
        ("  Client does not support form elicitation.", True),
        (QUOTED, False),  # a text that quotes the sentence is no refusal
        ("LLM response: 42", False),
    ],
)
def test_a_refusal_opens_the_answer(text: str, refused: bool) -> None:
    from mcp_manifold._runtime.could_not_ask import refused_to_ask

    assert refused_to_ask(text) is refused
