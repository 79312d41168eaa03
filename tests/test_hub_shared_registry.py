# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""The replicas' shared instance registry takes only records with a `url`: a `command` record written to the
store is not run by any replica, and `manifold register --command` with `state_url` is refused, naming why.
A real redis-server, a real gateway, a real SDK client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from mcp import Client

from tests.conftest import free_port, gateway_over_http
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


async def test_a_command_record_in_the_store_is_never_run(
    redis_server: RedisServer, write_config: Any, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    record = {
        "id": "planted",
        "command": "sh",
        "args": ["-c", f"touch {ran}"],
        "last_ping": time.time() + 3600,
        "ping_interval": 1000,
    }
    redis.Redis.from_url(redis_server.url).hset("manifold:instances", "planted", json.dumps(record))
    settings = {"http": True, "state_url": redis_server.url, "expose": ["hub"], "discovery_dir": str(tmp_path / "i")}
    config = write_config({}, settings)
    with gateway_over_http(config, port := free_port(), timeout=60):
        for mode in ("auto", "legacy"):  # a 2026-07-28 client and a session-era one
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
                assert "planted" not in (await client.call_tool("instances_list", {})).content[0].text
                for call in (("instances_connect", {}), ("instances_call", {"tool": "x"})):
                    refused = await client.call_tool(call[0], {"instance_id": "planted", **call[1]})
                    assert refused.is_error and "unknown instance 'planted'" in refused.content[0].text
    assert not ran.exists()


def test_register_refuses_a_command_with_state_url(write_config: Any, tmp_path: Path) -> None:
    config = write_config({}, {"state_url": "redis://127.0.0.1:1/0"})  # refused before the store is asked
    command = [sys.executable, "-m", "mcp_manifold", "register", "--name", "x", "--command", "srv --flag"]
    done = subprocess.run([*command, "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--command cannot be registered in the shared state" in " ".join(done.stderr.split()), done.stderr
