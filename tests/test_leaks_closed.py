"""Holes an adversarial pass over issue 21's fixes found, closed (secrets, operator data, name spaces).

One HTTP gateway, started with `OPS_SECRET` in its environment, hands the secret to a stdio server by
`${OPS_SECRET}`; the server repeats it in the errors of its resource and its prompt, and in a log
message it sends outside any request. Clients pick a profile by URL (loopback, no auth): `secrets`
sees that server, `maths` only another one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import free_port, gateway_over_http, server_entry

pytestmark = pytest.mark.anyio

SECRET = "ops-Secret-7d3e91b0"
SHOWN = "${OPS_SECRET}"
ENV = {**os.environ, "OPS_SECRET": SECRET}


@dataclass
class Gateway:
    base: str
    data: Path
    log: Path

    def url(self, profile: str) -> str:
        return f"{self.base}/mcp/p/{profile}"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    folder = tmp_path_factory.mktemp("leaks")
    data = folder / "data"
    servers = {
        # The handshake era: a server may log outside any request only on a session.
        "local": server_entry("secretive.py", "--api-key", SHOWN, protocol="legacy"),
        "numbers": server_entry("numbers.py"),
    }
    settings = {"data_dir": str(data), "expose": ["direct"], "log_level": "info"}
    profiles = {"secrets": {"servers": ["local"]}, "maths": {"servers": ["numbers"]}}
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers, "manifold": settings, "profiles": profiles}))
    port = free_port()
    log = folder / "gateway.log"
    with log.open("wb") as stderr, gateway_over_http(config, port, timeout=60, stderr=stderr, env=ENV):
        yield Gateway(f"http://127.0.0.1:{port}", data, log)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_servers_error_on_a_resource_or_prompt_shows_no_secret(gateway: Gateway, mode: str) -> None:
    async with Client(gateway.url("secrets"), mode=mode) as client:
        resources = await client.list_resources()
        uris = [str(resource.uri) for resource in resources.resources if "status" in str(resource.uri)]
        assert uris, resources
        with pytest.raises(MCPError) as read:
            await client.read_resource(uris[0])
        prompts = await client.list_prompts()
        names = [prompt.name for prompt in prompts.prompts if prompt.name.endswith("briefing")]
        assert names, prompts
        with pytest.raises(MCPError) as asked:
            await client.get_prompt(names[0])
    for refused in (read.value, asked.value):
        message = refused.error.message
        assert "refused key" in message and SHOWN in message, message
        assert SECRET not in message, message
    assert SECRET not in gateway.log.read_text()


async def test_a_servers_log_message_reaches_only_clients_that_may_see_it_and_shows_no_secret(
    gateway: Gateway,
) -> None:
    """A message a server logs outside any request goes to the clients whose profile lets them see that
    server (scrubbed), never to a client whose profile hides it. Session-era clients only: a 2026-07-28
    client gets log messages on its own requests alone, so none could reach it here."""
    heard: dict[str, list[str]] = {"secrets": [], "maths": []}

    def listener(profile: str) -> object:
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            heard[profile].append(f"{params.logger}: {params.data}")

        return on_log

    async with (
        Client(gateway.url("maths"), mode="legacy", logging_callback=listener("maths")) as outsider,
        Client(gateway.url("secrets"), mode="legacy", logging_callback=listener("secrets")) as insider,
    ):
        assert {tool.name for tool in (await outsider.list_tools()).tools} == {
            "numbers_add",
            "numbers_multiply",
            "numbers_sqrt",
        }
        result = await insider.call_tool("local_murmur", {})
        assert not result.is_error, result
        deadline = time.monotonic() + 30
        while not heard["secrets"] and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        await outsider.list_tools()  # a round trip: anything sent to it before has arrived
    assert heard["secrets"], heard
    assert all("still holds key" in line and SECRET not in line for line in heard["secrets"]), heard
    assert any(SHOWN in line for line in heard["secrets"]), heard
    assert heard["maths"] == [], heard
