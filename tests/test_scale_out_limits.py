# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""The shared in-flight slot of a call outlives the call: its lease follows the longest call the config allows
now (a server's own `timeout` may exceed `call_timeout`, and a reload may raise either), so a long call keeps
counting against `principal_max_calls` on every replica for as long as it runs. A real redis-server and a real
gateway."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
from mcp import Client

from tests.conftest import CLIENT_MODES, free_port, gateway_over_http, keyed_client, server_entry
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

FLIGHT = "manifold:limit:flight:anonymous"
ADA = "a" * 40  # principal ada's API key


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


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


async def test_a_client_calling_one_at_a_time_through_two_replicas_is_never_refused(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """`principal_max_calls` 1 and a client that waits for each call's answer before the next, its calls
    alternating between two replicas (as round robin sends them): the slot of a call that answered is gone
    before its answer goes out. Before, it waited up to 50 ms for the next admission on its own replica, and
    every other call was refused as a second call in flight."""
    manifold = {"http": True, "state_url": redis_server.url, "principal_max_calls": 1}
    config = write_config({"probe": server_entry("replica_probe.py")}, manifold)
    config.write_text(json.dumps({**json.loads(config.read_text()), "auth": {"api_keys": {"ada": ADA}}}))
    ports = [free_port(), free_port()]
    with contextlib.ExitStack() as stack:
        for index, port in enumerate(ports):
            env = {**os.environ, "MANIFOLD_REPLICA_ID": f"r{index}", "MANIFOLD_DATA_DIR": str(tmp_path / f"r{index}")}
            stack.enter_context(gateway_over_http(config, port, timeout=60, env=env))
        for mode in CLIENT_MODES:
            async with contextlib.AsyncExitStack() as clients:
                both = [
                    await clients.enter_async_context(keyed_client(f"http://127.0.0.1:{port}/mcp", ADA, mode))
                    for port in ports
                ]
                refused = [
                    text_of(result)
                    for turn in range(12)
                    if (result := await both[turn % 2].call_tool("probe_where", {})).is_error
                ]
                assert refused == [], (mode, refused)
