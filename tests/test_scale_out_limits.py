# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""The shared in-flight slot of a call outlives the call: its lease follows the longest call the config allows
now (a server's own `timeout` may exceed `call_timeout`, and a reload may raise either), so a long call keeps
counting against `principal_max_calls` on every replica for as long as it runs. A real redis-server and a real
gateway."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
from mcp import Client

from tests.conftest import free_port, gateway_over_http, server_entry
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

FLIGHT = "manifold:limit:flight:anonymous"


def lease_left(check: redis.Redis) -> float:
    """Seconds until the one slot in flight expires, by the store's clock."""
    [(_slot, expiry)] = check.zrange(FLIGHT, 0, -1, withscores=True)
    seconds, micros = check.time()
    return expiry / 1000 - (seconds + micros / 1_000_000)


async def test_a_calls_slot_lasts_as_long_as_its_servers_timeout_and_follows_a_reload(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    manifold = {"http": True, "state_url": redis_server.url, "principal_max_calls": 1, "call_timeout": 5}
    config = write_config({"probe": server_entry("replica_probe.py", timeout=300)}, manifold)
    check = redis.Redis.from_url(redis_server.url)
    port = free_port()
    gate = tmp_path / "gate"
    args = {"token": "long", "journal": str(tmp_path / "journal"), "gate": str(gate)}

    journal = Path(args["journal"])

    def calls_started() -> int:
        return len(journal.read_text().splitlines()) if journal.exists() else 0

    async def held_until_the_gate_opens(client: Client) -> float:
        before = calls_started()
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "probe_work", args)
            # Read the slot once the server runs the call: another request's slot (the client's own listing),
            # or the last call's finished one, may come and go before that.
            with anyio.fail_after(30):
                while calls_started() == before or check.zcard(FLIGHT) != 1:
                    await anyio.sleep(0.05)
            left = lease_left(check)
            gate.touch()
        gate.unlink()
        return left

    with gateway_over_http(config, port, timeout=60):
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            assert await held_until_the_gate_opens(client) > 300  # the server's timeout, not call_timeout + 30
            data = json.loads(config.read_text())
            data["mcpServers"]["probe"].pop("timeout")
            data["manifold"]["call_timeout"] = 900
            config.write_text(json.dumps(data))
            deadline = time.monotonic() + 30
            while True:  # the reload is applied within a few seconds: the next call's lease follows it
                left = await held_until_the_gate_opens(client)
                if left > 900 or time.monotonic() > deadline:
                    break
            assert left > 900


async def test_a_finished_calls_slot_is_removed_once_the_store_is_back(redis_server: RedisServer) -> None:
    """A call finishes while the store is down (a restart that keeps its data): its slot is removed when the
    store answers again, not left counted as a call in flight until its lease ends."""
    from mcp_manifold._core.limits import PrincipalLimits
    from mcp_manifold._runtime.shared_state.limits import SharedLimits
    from mcp_manifold._runtime.shared_state.store import StateStore

    store = StateStore(redis_server.url, "r0")
    limits = SharedLimits(store, PrincipalLimits(0, 0, 2), lease=lambda: 600)
    try:
        async with anyio.create_task_group() as group:
            await group.start(limits.run)
            await limits.acquire(None)
            assert redis.Redis.from_url(redis_server.url).zcard(FLIGHT) == 1
            redis.Redis.from_url(redis_server.url).shutdown(save=True)  # its data kept on disk
            assert redis_server.process is not None
            redis_server.process.wait(timeout=10)
            limits.release(None)
            await anyio.sleep(0.5)  # the removal is tried, and fails
            redis_server.start()
            check = redis.Redis.from_url(redis_server.url)
            assert check.zcard(FLIGHT) in (0, 1)
            with anyio.fail_after(10):
                while check.zcard(FLIGHT):
                    await anyio.sleep(0.1)
            group.cancel_scope.cancel()
    finally:
        await store.close()
