# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""What another writer left in the shared store that this version cannot read (a newer version's field, a
truncated value, bytes that are not UTF-8, a row of the wrong shape): each bad entry is logged, naming it, and
skipped; the rest still count, and no replica stops or fails to start over it. A real redis-server, and real
gateways where the point is that the process lives on."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx  # the MCP SDK's HTTP client
import pytest
import redis

from mcp_manifold._core.pins import Pin
from mcp_manifold._runtime.pin_store import PinStore
from mcp_manifold._runtime.shared_state.pins import SharedPins, shared_pins
from mcp_manifold._runtime.shared_state.store import StateStore
from tests.conftest import free_port, gateway_over_http, server_entry
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

GOOD = {"server": "probe", "tool": "ok", "state": "pinned", "hash": "h", "definition": {"name": "ok"}}
BAD_PINS = {
    "probe\tnewer": json.dumps({**GOOD, "tool": "newer", "approved_by": "ops"}),  # read: the extra field ignored
    "probe\ttruncated": '{"server": "probe", "tool": "truncated", "sta',
    "probe\tstate": json.dumps({**GOOD, "tool": "state", "state": "blessed"}),
    "probe\tbytes": b"\xff\xfe",
    "probe\tlist": "[1, 2]",
}


def _gateway_lives_on(config: Path, log: Path, spoil: Any, *, expect: str) -> None:
    """A real gateway starts with the bad entries already there, lives on as more come, and logs `expect`."""
    port = free_port()
    spoil()
    with log.open("wb") as stderr, gateway_over_http(config, port, timeout=60, stderr=stderr) as process:
        deadline = time.monotonic() + 60
        while httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        spoil()  # and again while it runs
        time.sleep(5)  # past every shared-state loop's period
        assert process.poll() is None, log.read_text()
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    assert expect in log.read_text()


async def test_bad_shared_pins_are_skipped_and_named(
    redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    check = redis.Redis.from_url(redis_server.url)
    check.hset("manifold:pins", mapping={"probe\tok": json.dumps(GOOD), **BAD_PINS})
    check.incr("manifold:pins:version")
    store = StateStore(redis_server.url, "r0")
    pins = PinStore(tmp_path, "enforce")
    shared = SharedPins(store, pins, changed=lambda: anyio.sleep(0))
    caplog.set_level(logging.ERROR)
    try:
        async with anyio.create_task_group() as group:
            await group.start(shared.run)
            group.cancel_scope.cancel()
        assert sorted(pin.tool for pin in pins.pins()) == ["newer", "ok"]
        assert sorted(pin.tool for pin in await shared_pins(redis_server.url)) == ["newer", "ok"]  # the CLI's read
    finally:
        await store.close()
    logged = caplog.text
    assert "'probe\\ttruncated': not JSON" in logged
    assert "'probe\\tstate': state 'blessed' is not one of" in logged
    assert "'probe\\tbytes': not JSON" in logged and "'probe\\tlist': a JSON list, not an object" in logged


def test_a_gateway_lives_on_with_bad_shared_pins(write_config: Any, redis_server: RedisServer, tmp_path: Path) -> None:
    config = write_config(
        {"probe": server_entry("replica_probe.py")}, {"http": True, "state_url": redis_server.url, "pinning": "enforce"}
    )
    check = redis.Redis.from_url(redis_server.url)

    def spoil() -> None:
        check.hset("manifold:pins", mapping=BAD_PINS)
        check.incr("manifold:pins:version")

    _gateway_lives_on(config, tmp_path / "gateway.log", spoil, expect="skipped shared pin 'probe\\ttruncated'")


def test_pin_fields_a_newer_version_added_are_ignored() -> None:
    from mcp_manifold._runtime.shared_state.pin_entries import read_pin

    pin = read_pin(json.dumps({**GOOD, "approved_by": "ops", "changed_at": 5}))
    assert pin == Pin("probe", "ok", "pinned", "h", {"name": "ok"}, changed_at=5)


NOT_UTF8 = "caf\xc3".encode("latin-1")  # 'café' cut inside its last character


async def test_learned_entries_that_are_not_utf8_are_skipped_and_named(
    redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_manifold._runtime.listing_cache import ListingCache
    from mcp_manifold._runtime.shared_state.learned import SharedLearning

    good = "0123456789abcdef01234567.json"
    check = redis.Redis.from_url(redis_server.url)
    check.hset("manifold:listings", mapping={good: '{"format": 1}', "bad.json": NOT_UTF8, NOT_UTF8: "{}"})
    check.sadd("manifold:asks-mid-call", NOT_UTF8, "someserver")
    store = StateStore(redis_server.url, "r0")
    learning = SharedLearning(store, ListingCache(tmp_path / "cache"), list)
    caplog.set_level(logging.ERROR)
    try:
        await learning.prefetch()
        await learning._exchange()
        await learning._exchange()  # each bad entry is logged once, not every round
    finally:
        await store.close()
    assert sorted(path.name for path in (tmp_path / "cache").iterdir()) == [good]
    lines = [record.getMessage() for record in caplog.records]
    assert sum("manifold:asks-mid-call that is not UTF-8" in line and "caf\\xc3" in line for line in lines) == 1
    assert any("manifold:listings bad.json that is not UTF-8" in line for line in lines)
    assert any("manifold:listings that is not UTF-8" in line for line in lines)  # the name itself


def test_a_gateway_lives_on_with_learned_entries_that_are_not_utf8(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    config = write_config({"probe": server_entry("replica_probe.py")}, {"http": True, "state_url": redis_server.url})
    check = redis.Redis.from_url(redis_server.url)

    def spoil() -> None:
        check.hset(
            "manifold:listings", "0123456789abcdef01234567.json", b'{"format": 1, "tools": [{"name": "' + NOT_UTF8
        )
        check.sadd("manifold:asks-mid-call", NOT_UTF8)

    _gateway_lives_on(config, tmp_path / "gateway.log", spoil, expect="manifold:asks-mid-call that is not UTF-8")
