"""Holes an adversarial pass over issue 21's fixes found, closed (secrets, operator data, name spaces).

One HTTP gateway, started with `OPS_SECRET` in its environment, hands the secret to a stdio server by
`${OPS_SECRET}`; the server repeats it in the errors of its resource and its prompt. A client in each
era reads and asks for them and must see the error, never the secret.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import free_port, manifold_command, server_entry, stop_process, wait_for_port

pytestmark = pytest.mark.anyio

SECRET = "ops-Secret-7d3e91b0"
SHOWN = "${OPS_SECRET}"
ENV = {**os.environ, "OPS_SECRET": SECRET}


@dataclass
class Gateway:
    url: str
    data: Path
    log: Path


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    folder = tmp_path_factory.mktemp("leaks")
    data = folder / "data"
    servers = {"local": server_entry("secretive.py", "--api-key", SHOWN)}
    settings = {"data_dir": str(data), "expose": ["direct"], "log_level": "info"}
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    port = free_port()
    log = folder / "gateway.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            manifold_command(config, "--http", "--port", str(port)), start_new_session=True, stderr=stderr, env=ENV
        )
    try:
        wait_for_port(port, process, timeout=60)
        yield Gateway(f"http://127.0.0.1:{port}/mcp", data, log)
    finally:
        stop_process(process)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_servers_error_on_a_resource_or_prompt_shows_no_secret(gateway: Gateway, mode: str) -> None:
    async with Client(gateway.url, mode=mode) as client:
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
