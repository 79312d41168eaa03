# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""Held-call answers handed from one replica to another (`/_manifold/held`) end at the replica they are handed
to: a retry that reaches a replica which does not hold the call, although the directory named it, is answered
"gone" and never handed on (else a replica restarted at the same address, or a wrong `replica_url`, would hand
the retry to itself without end). A real redis-server and a real gateway."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx  # the MCP SDK's HTTP client
import pytest
import redis

from mcp_manifold._runtime.shared_state.held import HELD_PATH, TOKEN_HEADER
from mcp_manifold._runtime.shared_state.replicas import ReplicaDirectory
from mcp_manifold._runtime.shared_state.store import StateStore
from tests.conftest import free_port, gateway_over_http, server_entry
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


async def test_answers_handed_to_a_replica_that_does_not_hold_the_call_are_not_handed_on(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    config = write_config({"probe": server_entry("replica_probe.py")}, {"http": True, "state_url": redis_server.url})
    port = free_port()
    log = tmp_path / "gateway.log"
    with log.open("wb") as stderr, gateway_over_http(config, port, timeout=60, stderr=stderr):
        here = f"http://127.0.0.1:{port}"
        check = redis.Redis.from_url(redis_server.url)
        deadline = time.monotonic() + 30
        while (token := check.get("manifold:secret:replica-token")) is None:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        # The row a run of this replica before a restart left, still fresh: it names this very address.
        store = StateStore(redis_server.url, "before-restart")
        try:
            await ReplicaDirectory(store, "old-run", here, dict).beat()
        finally:
            await store.close()
        body = {"holder": "old-run", "id": "x", "responses": {}, "progress": False, "logLevel": None}
        started = time.monotonic()
        async with httpx.AsyncClient(timeout=20) as client:
            answer = await client.post(here + HELD_PATH, json=body, headers={TOKEN_HEADER: token.decode()})
        assert time.monotonic() - started < 5  # one hop, not a loop until something times out
        [line] = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
        assert "the replica holding the call these answers are for is gone" in line["error"]
    assert "answers for a held call of run old-run were handed to this replica" in log.read_text()
