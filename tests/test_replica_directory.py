# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""The replica directory (`manifold:replicas`): a row that cannot be read is logged, removed and skipped, and the
status and the held-call lookup go on; liveness is judged by the store's clock, so a replica whose clock is behind
is not taken for gone. A real redis-server."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
import redis

from mcp_manifold._runtime.shared_state.replicas import STALE, ReplicaDirectory
from mcp_manifold._runtime.shared_state.status import replica_rows
from mcp_manifold._runtime.shared_state.store import StateStore
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

BAD_ROWS = {
    "truncated": '{"id": "r9", "url": "ht',
    "iso": json.dumps({"id": "r9", "url": "http://r9", "seen": "2026-01-01T00:00:00Z"}),
    "list": "[1]",
    "url": json.dumps({"id": "r9", "url": 5, "seen": 1}),
    "bytes": b"\xff",
}


async def test_unreadable_rows_are_dropped_and_named(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = StateStore(redis_server.url, "r0")
    check = redis.Redis.from_url(redis_server.url)
    caplog.set_level(logging.ERROR)
    try:
        directory = ReplicaDirectory(store, "good", "http://r0", dict)
        await directory.beat()
        check.hset("manifold:replicas", mapping=BAD_ROWS)
        assert await directory.address("iso") is None  # held-call forwarding: "gone", not an exception
        assert [row["id"] for row in await replica_rows(redis_server.url)] == ["r0"]  # the status
        assert await directory.address("good") == "http://r0"
    finally:
        await store.close()
    assert check.hkeys("manifold:replicas") == [b"good"]  # removed as found
    assert "dropped replica row 'truncated' from manifold:replicas: not JSON" in caplog.text
    assert (
        "dropped replica row 'iso' from manifold:replicas: seen '2026-01-01T00:00:00Z' is not a number" in caplog.text
    )


async def test_a_replica_whose_clock_is_behind_is_alive(redis_server: RedisServer, monkeypatch: Any) -> None:
    store = StateStore(redis_server.url, "slow")
    try:
        directory = ReplicaDirectory(store, "slow-run", "http://slow", dict)
        behind = time.time
        with monkeypatch.context() as patched:  # its clock, 30 s behind the others', writes its row
            patched.setattr(time, "time", lambda: behind() - 3 * STALE)
            await directory.beat()
        [row] = await replica_rows(redis_server.url)
        assert row["id"] == "slow" and row["age"] < STALE
        assert await directory.address("slow-run") == "http://slow"
    finally:
        await store.close()


async def test_a_row_the_store_lost_is_looked_for_until_its_replica_writes_it_again(redis_server: RedisServer) -> None:
    """The store emptied (FLUSHALL, or a restart without persistence) while a replica held a call: its row is
    gone until its next heartbeat, and answers to the call that came through another replica meanwhile are
    handed to it then. Before, it was taken for gone at once: the call ran on, held, while its client was told
    to call again, and blocked the questions of that server's other calls until held_call_timeout."""
    import anyio

    stores = [StateStore(redis_server.url, replica) for replica in ("r0", "r1")]
    holder = ReplicaDirectory(stores[0], "run-0", "http://r0", dict)
    other = ReplicaDirectory(stores[1], "run-1", "http://r1", dict)
    try:
        async with anyio.create_task_group() as group:
            await group.start(holder.run)  # its first row, then a heartbeat every HEARTBEAT seconds
            redis.Redis.from_url(redis_server.url).flushall()
            assert await other.address("run-0") == "http://r0"
            group.cancel_scope.cancel()
    finally:
        for store in stores:
            await store.close()
