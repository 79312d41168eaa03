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


async def test_a_store_that_cannot_be_reached_is_not_named_to_the_client() -> None:
    """A retry reaching a replica that cannot look the holder up (the store is down): the client is told so, but
    not the store's host and port (redis-py's own text, which the log has)."""
    from mcp_manifold._core.clients import Caller, Request
    from mcp_manifold._errors import ManifoldError
    from mcp_manifold._runtime.input_bridge import HeldCalls, State
    from mcp_manifold._runtime.shared_state.held import HeldForwarding
    from mcp_manifold._runtime.shared_state.shared_secrets import SharedSecret

    port = free_port()  # nothing listens there
    store = StateStore(f"redis://127.0.0.1:{port}/0", "r0")
    forwarding = HeldForwarding(
        HeldCalls(60), ReplicaDirectory(store, "me", None, dict), SharedSecret("replica-token", "t"), 60
    )
    try:
        with pytest.raises(ManifoldError, match="the shared state store is unreachable") as raised:
            await forwarding.forward(State("held", held_id="x", holder="other"), Request(Caller()))
    finally:
        await forwarding.close()
        await store.close()
    assert str(port) not in str(raised.value) and "127.0.0.1" not in str(raised.value)
