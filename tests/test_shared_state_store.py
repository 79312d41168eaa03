# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""A store that answers but refuses (full under `maxmemory` with `noeviction`): the log names its error, not an
outage, once; the replica is not ready while it refuses (a PING alone still passes), and ready again once it
accepts. A real redis-server and a real gateway."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx  # the MCP SDK's HTTP client
import pytest
import redis
from mcp import Client

from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable
from tests.conftest import free_port, gateway_over_http, manifold_command, server_entry
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


def full(server: RedisServer, on: bool) -> None:
    check = redis.Redis.from_url(server.url)
    check.config_set("maxmemory-policy", "noeviction")
    check.config_set("maxmemory", "1" if on else "0")  # 1 byte: every write is refused with OOM


async def test_a_full_store_is_named_as_full_not_as_unreachable(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = StateStore(redis_server.url, "r0")
    caplog.set_level(logging.WARNING)
    try:
        full(redis_server, True)
        for _ in range(3):
            with pytest.raises(StateUnavailable, match=r"refused a command \(limits\): OutOfMemoryError"):
                await store.run("limits", lambda: store.client.set("manifold:x", "1"))
            assert not await store.ping()  # answers, but not ready
        full(redis_server, False)
        await store.run("limits", lambda: store.client.set("manifold:x", "1"))
        assert await store.ping()
    finally:
        await store.close()
    lines = [record.getMessage() for record in caplog.records]
    assert sum("SHARED STATE REFUSING" in line and "OutOfMemoryError" in line for line in lines) == 1
    assert not any("cannot reach" in line or "reachable again" in line for line in lines)
    assert sum("accepts commands again" in line for line in lines) == 1


def test_a_gateway_is_not_ready_while_its_store_refuses_writes(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    config = write_config({"probe": server_entry("replica_probe.py")}, {"http": True, "state_url": redis_server.url})
    port = free_port()
    log = tmp_path / "gateway.log"

    def until(status: int) -> None:
        deadline = time.monotonic() + 30
        while httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code != status:
            assert time.monotonic() < deadline, f"/readyz never answered {status}: {log.read_text()}"
            time.sleep(0.2)

    with log.open("wb") as stderr, gateway_over_http(config, port, timeout=60, stderr=stderr):
        until(200)
        full(redis_server, True)
        until(503)  # its write of the shared secrets was refused
        full(redis_server, False)
        until(200)
    assert "SHARED STATE REFUSING" in log.read_text() and "OutOfMemoryError" in log.read_text()


def test_readiness_probes_ask_the_store_at_most_once_a_second(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """/readyz needs no credential: each one sent the store a PING (1,500 probes, 1,646 commands)."""
    config = write_config({"probe": server_entry("replica_probe.py")}, {"http": True, "state_url": redis_server.url})
    port = free_port()
    store = redis.Redis.from_url(redis_server.url)
    with gateway_over_http(config, port, timeout=60):
        with httpx.Client() as client:
            assert client.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
            before = store.info("commandstats").get("cmdstat_ping", {}).get("calls", 0)
            started = time.monotonic()
            for _ in range(200):
                assert client.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
            seconds = time.monotonic() - started
        pings = store.info("commandstats").get("cmdstat_ping", {}).get("calls", 0) - before
    assert pings <= seconds + 2, (pings, seconds)  # the replica's own heartbeat sends none


async def test_a_kind_refused_while_full_is_tried_again_by_the_readiness_check(redis_server: RedisServer) -> None:
    """A kind run only for requests (a rate limit's admission) and refused while the store was full: once the
    store has room, the readiness check alone finds it out (a balancer sends a replica that is not ready
    nothing, so no admission would ever come to clear it)."""
    store = StateStore(redis_server.url, "r0")
    try:
        full(redis_server, True)
        with pytest.raises(StateUnavailable, match=r"refused a command \(limits\)"):
            await store.run("limits", lambda: store.client.set("manifold:x", "1"))
        assert not await store.ping()
        full(redis_server, False)
        assert await store.ping()  # no command of the kind "limits" ran since
    finally:
        await store.close()


def test_a_gateway_with_a_rate_limit_is_ready_again_without_a_call_once_its_store_has_room(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Its call while the store was full had its admission refused (a rate limit alone: the script's first
    write is one a full store refuses); no call comes after, as none would from a balancer checking /readyz."""
    manifold = {"http": True, "state_url": redis_server.url, "rate_limit": 50}
    config = write_config({"probe": server_entry("replica_probe.py")}, manifold)
    port = free_port()
    log = tmp_path / "gateway.log"
    ready = f"http://127.0.0.1:{port}/readyz"
    with log.open("wb") as stderr, gateway_over_http(config, port, timeout=60, stderr=stderr):

        def until(status: int) -> None:  # the store is asked at most once a second
            deadline = time.monotonic() + 30
            while httpx.get(ready, timeout=5).status_code != status:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)

        until(200)  # its servers listed
        full(redis_server, True)
        anyio.run(call_probe, f"http://127.0.0.1:{port}/mcp")  # served, by this replica's own limits
        until(503)
        full(redis_server, False)
        until(200)  # with no call in between: /readyz itself tried the refused kind again
    assert "SHARED STATE REFUSING" in log.read_text()


async def call_probe(url: str) -> None:
    async with Client(url) as client:
        assert not (await client.call_tool("probe_where", {})).is_error


def test_a_replica_starts_on_a_full_store_that_holds_the_shared_secrets(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """A replica restarted (a rolling update, a crash) while the store is full: the secrets it needs are there
    to read, so it starts, and is ready once the store has room. Before, its `SET NX` was refused and it exited."""
    from mcp_manifold._runtime.shared_state.shared_secrets import shared_secret

    async def made_by_a_first_replica() -> None:
        store = StateStore(redis_server.url, "r0")
        try:
            for name in ("request-state", "replica-token"):
                await shared_secret(store, name)
        finally:
            await store.close()

    anyio.run(made_by_a_first_replica)
    config = write_config({"probe": server_entry("replica_probe.py")}, {"http": True, "state_url": redis_server.url})
    port = free_port()
    log = tmp_path / "gateway.log"
    ready = f"http://127.0.0.1:{port}/readyz"
    full(redis_server, True)
    with log.open("wb") as stderr, gateway_over_http(config, port, timeout=60, stderr=stderr):
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200, log.read_text()
        full(redis_server, False)
        deadline = time.monotonic() + 30
        while httpx.get(ready, timeout=5).status_code != 200:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)


async def test_a_replicas_heartbeat_is_written_into_a_full_store(redis_server: RedisServer) -> None:
    """A full store refuses HSET: the replica's row went stale after 10 s, and every answer to a call it held,
    sent through another replica, was refused as "the replica holding the call ... is gone" while it ran on.
    Its heartbeat replaces its own row (no growth), so it is written all the same and the row stays fresh."""
    from mcp_manifold._runtime.shared_state.replicas import ReplicaDirectory

    store = StateStore(redis_server.url, "r0")
    directory = ReplicaDirectory(store, "run-0", "http://10.0.0.10:8765", dict)
    check = redis.Redis.from_url(redis_server.url)
    try:
        await directory.beat()
        before = json.loads(check.hget("manifold:replicas", "run-0"))["seen"]
        full(redis_server, True)
        await directory.beat()
        assert json.loads(check.hget("manifold:replicas", "run-0"))["seen"] > before
        assert await directory.address("run-0") == "http://10.0.0.10:8765"
    finally:
        full(redis_server, False)
        await store.close()


async def test_a_store_that_hangs_after_an_outage_holds_a_command_briefly_not_for_its_socket_timeout(
    redis_server: RedisServer,
) -> None:
    """The store went down (connection refused); then something takes connections on its port and answers
    nothing (a hung store). The next command, once a retry is due, gets a brief PING and the outage error;
    before, it waited the whole socket timeout (2 s by default, 60 s here), as did every command sent then."""
    store = StateStore(redis_server.url, "r0", timeout=60)
    try:
        redis_server.stop()
        with pytest.raises(StateUnavailable, match="unreachable"):
            await store.run("limits", store.client.ping)
        with socket.socket() as hung:
            hung.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            hung.bind(("127.0.0.1", redis_server.port))
            hung.listen(16)  # the kernel completes connections; nothing ever reads or answers them
            store._retry_at = 0.0  # a retry is due (rather than sleeping for RETRY)
            with anyio.fail_after(20), pytest.raises(StateUnavailable, match="unreachable"):
                await store.run("limits", store.client.ping)
    finally:
        await store.close()


def test_a_replica_that_cannot_reach_the_store_at_start_says_so_once(tmp_path: Path) -> None:
    """A replica whose store is down at start exits saying why; before, an ERROR line said first that limits
    were per replica until the store was back, as if it would serve."""
    settings = {"state_url": f"redis://127.0.0.1:{free_port()}/0", "data_dir": str(tmp_path / "data"), "lazy": True}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"numbers": server_entry("numbers.py")}, "manifold": settings}))
    started = subprocess.run(
        manifold_command(config), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert started.returncode != 0, started.stderr
    assert "the shared state store is unreachable (shared secrets)" in started.stderr, started.stderr
    assert "a replica cannot start without it" in started.stderr and "per replica" not in started.stderr, started.stderr
