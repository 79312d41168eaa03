"""The MCP conformance suite (what `make conformance` runs): its client scenarios with the gateway as the
client, and its server scenarios against a server directly and through the gateway.

Needs the suite and its Node 22, installed from npm in tests/conformance/node, and the TypeScript SDK in
tests/node for the server the server scenarios run against (`make node` or `make conformance`); skipped
with the reason when they are not there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import answer_sampling, free_port, gateway_over_http, server_entry, stop_process, wait_for_port

HERE = Path(__file__).parent / "conformance"
SUITE = HERE / "node" / "node_modules" / ".bin" / "conformance"
NODE = HERE / "node" / "node_modules" / ".bin" / "node"
FIXTURE = Path(__file__).parent / "servers" / "conformance_everything.mjs"
TS_SDK = Path(__file__).parent / "node" / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"

needs_suite = pytest.mark.skipif(not SUITE.exists(), reason="the conformance suite is not installed (make conformance)")
needs_ts_server = pytest.mark.skipif(
    not (NODE.exists() and TS_SDK.exists()),
    reason="Node 22 (tests/conformance/node) or the TypeScript SDK (tests/node) is not installed (make node)",
)


@needs_suite
def test_the_client_scenarios_and_the_auth_suite_pass(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "CONFORMANCE_RESULTS": str(tmp_path)}
    done = subprocess.run(
        [str(HERE / "run.sh"), "client"], env=env, capture_output=True, text=True, timeout=1200, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert output.count("OVERALL: PASSED") == 3  # initialize, tools_call, sse-retry
    assert "0 failed" in output.split("SUITE SUMMARY")[-1]  # the auth suite


@needs_suite
@needs_ts_server
def test_every_server_check_that_passes_directly_passes_through_the_gateway(tmp_path: Path) -> None:
    """Every server scenario (`--suite all`), against the TypeScript fixture directly and through `manifold
    serve --http` in front of it: what passes one way passes the other."""
    report_file = tmp_path / "report.json"
    command = [sys.executable, str(HERE / "server_scenarios.py"), "--json", str(report_file), "--keep", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert report_file.exists(), (done.stdout + done.stderr)[-4000:]
    report = json.loads(report_file.read_text())
    assert report["lost"] == {}, report
    assert report["direct"]["failed"] == 0, report  # the fixture does what the scenarios ask
    assert report["direct"]["passed"] >= 40, report  # 0.1.16: 44 checks, none skipped
    assert done.returncode == 0, done.stdout


# --- a server that asks its client mid-call, behind a shared HTTP session ----------------------------------


@pytest.fixture
def ts_server(tmp_path: Path) -> Iterator[str]:
    """The conformance fixture (TypeScript SDK 1.32.2, session era only) over streamable HTTP."""
    port = free_port()
    with (tmp_path / "ts-server.log").open("wb") as log:
        process = subprocess.Popen(
            [str(NODE), str(FIXTURE), "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for_port(port, process, timeout=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@needs_ts_server
@pytest.mark.anyio
async def test_a_server_that_could_not_ask_is_reached_in_the_callers_own_session(
    tmp_path: Path, ts_server: str
) -> None:
    """The TypeScript SDK server asks its client mid-call; through the gateway's one shared session, which
    promises nothing about any client, it is refused and says so in its answer ("Sampling not supported").
    The gateway recognises that, learns it for good, and makes the call again in a session of the caller's
    own that tells the server it can sample: the caller gets its answer from the first call. A client
    that cannot sample gets the server's own answer, as it would directly."""
    data = tmp_path / "data"
    config = tmp_path / "mcp.json"
    servers = {"everything": {"url": ts_server, "prefix": ""}}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(data)}}))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    arguments = {"prompt": "what is 6 x 7?"}
    with gateway_over_http(config, port, timeout=60, stderr=(tmp_path / "gateway.log").open("wb")):
        async with Client(url, mode="legacy") as cannot_sample:
            refused = await cannot_sample.call_tool("test_sampling", arguments)
        assert "Sampling not supported" in text_of(refused), text_of(refused)
        assert not (data / "learned.json").exists()  # that client could not have answered: nothing to learn

        async with Client(url, mode="legacy", sampling_callback=answer_sampling) as can_sample:
            answered = await can_sample.call_tool("test_sampling", arguments)
            assert text_of(answered) == "LLM response: answer to what is 6 x 7?", text_of(answered)
            again = await can_sample.call_tool("test_sampling", {"prompt": "and 7 x 8?"})
            assert text_of(again) == "LLM response: answer to and 7 x 8?", text_of(again)
            assert text_of(await can_sample.call_tool("test_simple_text", {})).startswith("This is a simple text")

        async with Client(url, mode="legacy") as still_cannot:
            refused = await still_cannot.call_tool("test_sampling", arguments)
        assert "Sampling not supported" in text_of(refused), text_of(refused)
    learned = json.loads((data / "learned.json").read_text())
    assert list(learned.values()) == [["needs_session"]], learned  # kept for the next start


@needs_ts_server
@pytest.mark.anyio
async def test_an_authenticated_2026_client_is_asked_by_a_session_era_server_in_its_own_session(
    tmp_path: Path, ts_server: str
) -> None:
    """The same server and a 2026-07-28 client that authenticates (so the gateway tells it apart): its first
    call is made again in a session of its own, where the server's mid-call question is held and handed to
    the client as `input_required`; the SDK client answers and gets the result."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from mcp_manifold._config.security import hash_key

    key = "mfk_conformance-key"
    config = tmp_path / "mcp.json"
    settings = {"data_dir": str(tmp_path / "data")}
    auth = {"api_keys": {"ada": {"sha256": hash_key(key)}}}
    servers = {"everything": {"url": ts_server, "prefix": ""}}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": settings, "auth": auth}))
    port = free_port()
    with gateway_over_http(config, port, timeout=60, stderr=(tmp_path / "gateway.log").open("wb")):
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http,
            Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
                sampling_callback=answer_sampling,
            ) as client,
        ):
            for prompt in ("first", "second"):
                answered = await client.call_tool("test_sampling", {"prompt": prompt})
                assert text_of(answered) == f"LLM response: answer to {prompt}", text_of(answered)


# --- a server's error that asks the client to act reaches it as the server sent it ----------------------


@pytest.mark.anyio
async def test_a_missing_client_capability_reaches_the_client_as_the_servers_error(
    connect: Any, write_config: Any
) -> None:
    """asks.py (2026-07-28) refuses a request whose client did not declare what its question needs with
    -32021 and the capabilities in its data; through the gateway the client gets that error, code and data
    as sent (the conformance suite's 2026-07-28 scenarios check it), not a tool's error text."""
    config = write_config({"asks": server_entry("asks.py", "--era", "modern")})
    async with connect(config) as client:  # declares no elicitation
        with pytest.raises(MCPError) as refused:
            await client.call_tool("asks_ask_name", {})
    error = refused.value.error
    assert error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY, error
    assert error.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}, error
    assert "the client did not declare the form elicitation capability" in error.message, error


@pytest.mark.parametrize(
    ("text", "method"),
    [
        ("Sampling not supported or error: MCP error -32600: Sampling not supported", "sampling/createMessage"),
        ("Elicitation not supported or error: Client does not support form elicitation.", "elicitation/create"),
        ("Client does not support sampling (required for sampling/createMessage)", "sampling/createMessage"),
        ("Client does not support listing roots (required for roots/list)", "roots/list"),
        ("Client does not support URL elicitation (required for elicitation/create)", "elicitation/create"),
        ("Error: Cannot send 'roots/list': this transport context has no back-channel for ...", "roots/list"),
        ("MCP error -32600: List roots not supported", "roots/list"),
        ("This is a simple text response for testing.", None),
        ("Sampling is not supported by this model", None),
    ],
)
def test_what_servers_say_when_they_could_not_ask_their_client(text: str, method: str | None) -> None:
    from mcp_manifold._sdk import asked_without_back_channel

    assert asked_without_back_channel(text) == method
