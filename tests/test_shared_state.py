# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""Shared state without a cluster: what a gateway without state_url does not load, the audit log on stdout, the
pins the CLI publishes, the setting's check."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from mcp import Client

from mcp_manifold._config.problems import Problems
from mcp_manifold._config.settings import Settings, resolve_settings
from mcp_manifold._core.pins import Pin
from mcp_manifold._runtime.shared_state.pins import publish_decisions
from tests.conftest import free_port, manifold_command, server_entry, stop_process, wait_for_port
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


def test_without_state_url_nothing_of_it_is_loaded(write_config: Any) -> None:
    config = write_config({"numbers": server_entry("numbers.py")}, {"rate_limit": 5})
    code = f"""
import sys, anyio
from mcp_manifold import Gateway, load_config
from mcp_manifold._core.clients import Caller, Request
async def main():
    async with Gateway(load_config({str(config)!r})) as gateway:
        result = await gateway.call_tool_by_name(Request(Caller()), "numbers_add", {{"a": 1, "b": 2}})
        assert not result.is_error, result
anyio.run(main)
print(sorted(name for name in sys.modules if name.split(".")[0] == "redis" or ".shared_state" in name))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_state_url_must_be_a_redis_url() -> None:
    problems = Problems("test.json", [])
    resolve_settings({"state_url": "http://cache:6379"}, None, {}, problems)
    [problem] = problems.items
    assert problem.field == "state_url" and "must be a redis:// or rediss:// URL" in problem.message
    settings = resolve_settings({"state_url": "rediss://:pw@cache:6380/2"}, None, {}, Problems("test.json", []))
    assert settings.state_url == "rediss://:pw@cache:6380/2" and Settings().state_url is None


async def test_audit_lines_go_to_stdout_and_name_the_replica(write_config: Any, tmp_path: Path) -> None:
    config = write_config({"numbers": server_entry("numbers.py")}, {"audit_path": "-", "replica_id": "edge-1"})
    port = free_port()
    out = tmp_path / "stdout.txt"
    with out.open("wb") as stdout:
        process = subprocess.Popen(
            manifold_command(config, "--http", "--port", str(port)), stdout=stdout, start_new_session=True
        )
    try:
        wait_for_port(port, process)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await client.call_tool("numbers_add", {"a": 1, "b": 2})
        deadline = time.monotonic() + 20
        while not out.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop_process(process)
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    assert [(line["name"], line["outcome"], line["replica"]) for line in lines] == [("numbers_add", "ok", "edge-1")]
    assert not (tmp_path / "data" / "audit").exists()  # nothing written to the data dir


async def test_pin_decisions_published_by_the_cli_apply_whatever_the_clock(redis_server: RedisServer) -> None:
    """The last decision to reach the store is the one that holds, though the machine that made it has a clock
    behind the one before (its `changed_at` earlier): no machine's clock orders them."""
    approved = Pin("shifty", "send", "pinned", "h2", {"name": "send"}, changed_at=200.0)
    await publish_decisions(redis_server.url, [approved])
    await publish_decisions(redis_server.url, [replace(approved, state="rejected", changed_at=100.0)])  # clock behind
    store = redis.Redis.from_url(redis_server.url)
    kept = json.loads(store.hget("manifold:pins", "shifty\tsend"))
    assert (kept["state"], kept["changed_at"]) == ("rejected", 100.0)
    assert store.get("manifold:pins:version") == b"2"
    await publish_decisions(redis_server.url, [replace(approved, state="rejected", changed_at=100.0)])
    assert store.get("manifold:pins:version") == b"2"  # the same decision again changes nothing


async def test_an_approval_reaches_a_replica_whose_clock_runs_ahead(redis_server: RedisServer, tmp_path: Path) -> None:
    """A replica whose clock is two minutes fast quarantined a tool; an operator's approval, stamped by a correct
    clock (earlier), lifts the quarantine on it all the same."""
    import anyio

    from mcp_manifold._runtime.pin_store import PinStore
    from mcp_manifold._runtime.shared_state.pins import SharedPins
    from mcp_manifold._runtime.shared_state.store import StateStore

    now = time.time()
    changed = Pin("probe", "x", "changed", "old", {"name": "x"}, "new", {"name": "x", "v": 2}, changed_at=now + 120)
    pins = PinStore(tmp_path, "enforce")
    pins.merge([changed])
    store = StateStore(redis_server.url, "fast")
    shared = SharedPins(store, pins, changed=lambda: anyio.sleep(0))
    try:
        async with anyio.create_task_group() as group:
            await group.start(shared.run)
            with anyio.fail_after(10):  # its quarantine reaches the store
                while not redis.Redis.from_url(redis_server.url).hexists("manifold:pins", "probe\tx"):
                    await anyio.sleep(0.1)
            assert pins.blocked("probe", "x")
            approved = replace(changed, state="pinned", hash="new", definition=changed.candidate, changed_at=now)
            await publish_decisions(redis_server.url, [approved])
            with anyio.fail_after(10):
                while pins.blocked("probe", "x"):
                    await anyio.sleep(0.1)
            assert pins.get("probe", "x") == approved
            group.cancel_scope.cancel()
    finally:
        await store.close()


async def test_a_forget_after_the_store_lost_its_data_reaches_a_replica_that_never_saw_it_empty(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Redis restarted empty, and another replica wrote its pins back before this one looked (a busy host; in a
    cluster, one paused): `manifold pins forget` made then still reaches it, and what it offers back of the store
    it lost is not the forgotten server's. Before, the new store's forgets, numbered from 1 again, were below the
    last it took, so it kept the quarantine for good; and its stale pins went up over the forget to every replica."""
    import anyio

    from mcp_manifold._runtime.pin_store import PinStore
    from mcp_manifold._runtime.shared_state.pins import SharedPins, publish_forgotten
    from mcp_manifold._runtime.shared_state.store import StateStore

    check = redis.Redis.from_url(redis_server.url)
    check.set("manifold:pins:version", 100)
    check.zadd("manifold:pins:forgotten", {"gone": 100})  # forgotten before this replica started
    changed = Pin("shifty", "send", "changed", "old", {"name": "send"}, "new", {"name": "send", "v": 2}, 1.0)
    pins = PinStore(tmp_path, "enforce")
    pins.merge([changed, Pin("probe", "x", "pinned", "h", {"name": "x"})])
    store = StateStore(redis_server.url, "far")
    shared = SharedPins(store, pins, changed=lambda: anyio.sleep(0))
    try:
        await shared._exchange(flush=False)  # its first look, as at its start
        check.flushall()
        check.hset("manifold:pins", "probe\tx", json.dumps({"server": "probe", "tool": "x", "state": "pinned"}))
        check.incr("manifold:pins:version")  # another replica's pins, back first
        await publish_forgotten(redis_server.url, ["shifty"])
        await shared._exchange(flush=True)
        assert pins.get("shifty", "send") is None and not pins.blocked("shifty", "send")
        await shared._exchange(flush=True)  # what it offered back on seeing the store had lost its data goes up
        assert not check.hexists("manifold:pins", "shifty\tsend")
        assert check.hexists("manifold:pins", "probe\tx")
    finally:
        await store.close()
        pins.close()


async def test_a_forget_taken_from_the_store_that_lifts_a_quarantine_tells_the_clients(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """`manifold pins forget --yes` of a server with a quarantined tool: a replica taking it from the store serves
    the tool again, and tells its clients their tool lists changed (as a forget on its own data dir does).
    Before, it served it again in silence: a listen stream or a session never heard of it."""

    from mcp_manifold._runtime.pin_store import PinStore
    from mcp_manifold._runtime.shared_state.pins import SharedPins, publish_forgotten
    from mcp_manifold._runtime.shared_state.store import StateStore

    changed = Pin("shifty", "send", "changed", "old", {"name": "send"}, "new", {"name": "send", "v": 2}, 1.0)
    pins = PinStore(tmp_path, "enforce")
    pins.merge([changed])
    told: list[bool] = []

    async def tell() -> None:
        told.append(True)

    store = StateStore(redis_server.url, "far")
    shared = SharedPins(store, pins, changed=tell)
    try:
        await shared._exchange(flush=False)  # its first look, as at its start
        await publish_forgotten(redis_server.url, ["shifty"])
        await shared._exchange(flush=True)
        assert not pins.blocked("shifty", "send") and told == [True]
    finally:
        await store.close()
        pins.close()


async def test_a_forget_taken_from_the_store_keeps_the_tools_past_pin_max_tools_held_until_the_next_listing(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A running server's pins forgotten (`manifold pins forget`): its tools listed past `pin_max_tools` stay held
    under enforce until its next listing judges them afresh, as on a gateway that reads the forget from its file.
    Before, a replica taking the forget from the store served them at once, pinned nowhere, until that listing
    (which may never come: it holds them again)."""
    import anyio
    import mcp_types as types

    from mcp_manifold._core.listing import Listing
    from mcp_manifold._runtime.pin_store import PinStore
    from mcp_manifold._runtime.shared_state.pins import SharedPins, publish_forgotten
    from mcp_manifold._runtime.shared_state.store import StateStore

    pins = PinStore(tmp_path, "enforce", max_tools=2)
    listing = Listing(tools=[types.Tool(name=name, input_schema={}) for name in ("a", "b", "c")])
    pins.observe("renamer", listing)
    assert pins.blocked("renamer", "c")  # past the bound
    store = StateStore(redis_server.url, "far")
    shared = SharedPins(store, pins, changed=lambda: anyio.sleep(0))
    try:
        await shared._exchange(flush=False)
        await publish_forgotten(redis_server.url, ["renamer"])
        await shared._exchange(flush=True)
        assert pins.get("renamer", "a") is None and pins.blocked("renamer", "c")
        pins.observe("renamer", listing)  # its next listing: pinned afresh, up to the bound
        assert pins.get("renamer", "a") is not None and pins.blocked("renamer", "c")
    finally:
        await store.close()
        pins.close()


def test_manifold_pins_drops_the_pins_a_data_dir_kept_of_a_server_forgotten_since(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """An operator's data dir that `manifold pins` ran on before another machine's `pins forget`: it showed the
    forgotten server's old pins still (a quarantine the replicas no longer had), and approving one put it back
    in the shared store for every replica. Now those the store no longer has are dropped when it merges; what the
    replicas pinned afresh since, and other servers' pins, stay."""
    from mcp_manifold._cli.pins import _pin_store
    from mcp_manifold._runtime.pin_store import PinStore

    config = write_config({"probe": server_entry("replica_probe.py")}, {"state_url": redis_server.url})
    kept = PinStore(tmp_path / "data", "enforce")
    old = Pin("shifty", "old", "changed", "h", {"name": "old"}, "c", {"name": "old", "v": 2})
    other = Pin("probe", "x", "pinned", "h", {"name": "x"})
    kept.merge([old, Pin("shifty", "send", "pinned", "h0", {"name": "send"}), other])
    kept.close()
    store = redis.Redis.from_url(redis_server.url)
    store.zadd("manifold:pins:forgotten", {"shifty": 1})
    fresh = {"server": "shifty", "tool": "send", "state": "pinned", "hash": "h1", "definition": {"name": "send"}}
    store.hset("manifold:pins", "shifty\tsend", json.dumps(fresh))  # pinned afresh by a replica after the forget
    _cfg, pins = _pin_store(config)
    try:
        assert [(pin.server, pin.tool, pin.hash) for pin in pins.pins()] == [
            ("probe", "x", "h"),
            ("shifty", "send", "h1"),
        ]
    finally:
        pins.close()


def test_logs_name_the_store_without_its_password() -> None:
    from mcp_manifold._runtime.shared_state.store import _safe_url

    assert _safe_url("redis://:hunter2@cache:6379/0") == "redis://:***@cache:6379/0"
    assert _safe_url("redis://cache:6379/0") == "redis://cache:6379/0"
    assert _safe_url("redis://cache:6379/0?password=hunter2&db=1") == "redis://cache:6379/0?password=***&db=1"
    assert _safe_url("rediss://u:pw@cache/0?PASSWORD=x") == "rediss://u:***@cache/0?PASSWORD=***"


async def test_a_shared_registration_beats_and_leaves(redis_server: RedisServer) -> None:
    """`register_shared` (what `manifold register` does with state_url): the record is in the registry, its
    last_ping refreshed, and gone when it stops; a record that stops beating is dropped by the next reader."""
    import anyio

    from mcp_manifold._runtime.registration import build_record
    from mcp_manifold._runtime.shared_state.instances import SharedInstanceRecords, register_shared
    from mcp_manifold._runtime.shared_state.store import StateStore

    store = StateStore(redis_server.url, "test")
    records = SharedInstanceRecords(store)
    record = build_record("alpha", url="http://10.0.0.5:8000/mcp", instance_id="alpha-1", interval=0.2)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(register_shared, store, record)
            with anyio.fail_after(10):
                while "alpha-1" not in (await records.scan()).live:
                    await anyio.sleep(0.05)
            first = (await records.scan()).live["alpha-1"].last_ping
            await anyio.sleep(0.5)
            assert (await records.scan()).live["alpha-1"].last_ping > first  # its heartbeat
            group.cancel_scope.cancel()
        assert (await records.scan()).live == {}  # removed as it stopped
        silent = replace(record, last_ping=time.time() - 10)
        await records.publish([silent])
        assert (await records.scan()).live == {}  # missed three beats: stale, and dropped from the hash
        assert await store.client.hlen(records.key) == 0
    finally:
        await store.close()


async def test_shared_in_flight_limits_count_every_replica_and_free_finished_calls(redis_server: RedisServer) -> None:
    """Two replicas' `SharedLimits` on one store, two calls in flight allowed per principal: a third anywhere is
    refused; a finished call's slot is removed by the next admission (in the same round trip), or, with no
    admission coming, in the background; the slots of other principals are theirs."""
    import anyio

    from mcp_manifold._core.limits import PrincipalLimits
    from mcp_manifold._errors import RateLimited
    from mcp_manifold._runtime.shared_state.limits import FOLD_WINDOW, SharedLimits
    from mcp_manifold._runtime.shared_state.store import StateStore

    stores = [StateStore(redis_server.url, replica) for replica in ("r0", "r1")]
    first, second = (SharedLimits(store, PrincipalLimits(0, 0, 2), lease=lambda: 60) for store in stores)
    check = redis.Redis.from_url(redis_server.url)

    def running(principal: str) -> int:
        return check.zcard(f"manifold:limit:flight:{principal}")

    try:
        async with anyio.create_task_group() as group:
            await group.start(first.run)
            await group.start(second.run)
            await first.acquire("ada")
            await second.acquire("ada")
            with pytest.raises(RateLimited, match="already has 2 call"):
                await first.acquire("ada")
            await second.acquire("bo")  # another principal's own count
            assert (running("ada"), running("bo")) == (2, 1)
            first.release("ada")
            await first.acquire("ada")  # the finished call's slot went in the same round trip
            assert running("ada") == 2
            first.release("ada")
            second.release("ada")
            second.release("bo")
            with anyio.fail_after(10):  # no admission comes: the background removes them
                while running("ada") or running("bo"):
                    await anyio.sleep(FOLD_WINDOW)
            group.cancel_scope.cancel()
    finally:
        for store in stores:
            await store.close()


async def test_an_admission_cancelled_on_its_way_leaves_no_call_in_flight(redis_server: RedisServer) -> None:
    """An admission cancelled (its caller hung up) before the store's answer came back: whether or not the
    store ran it, neither the slot it may have taken nor the finished call's slot it carried (finished
    slots ride on the next admission) stays counted as a call in flight until its lease ends."""
    import anyio

    from mcp_manifold._core.limits import PrincipalLimits
    from mcp_manifold._runtime.shared_state.limits import FOLD_WINDOW, SharedLimits
    from mcp_manifold._runtime.shared_state.store import StateStore

    store = StateStore(redis_server.url, "r0")
    limits = SharedLimits(store, PrincipalLimits(0, 0, 2), lease=lambda: 60)
    check = redis.Redis.from_url(redis_server.url)
    key = "manifold:limit:flight:ada"
    try:
        for reconnect in (False, True):  # the script sent, then cancelled; cancelled while connecting
            await limits.acquire("ada")
            limits.release("ada")
            if reconnect:
                await store.client.connection_pool.disconnect()
            with anyio.CancelScope() as scope:
                scope.cancel()
                await limits.acquire("ada")  # cancelled at its first wait, a finished slot in hand
            async with anyio.create_task_group() as group:
                await group.start(limits.run)
                with anyio.fail_after(10):
                    while check.zcard(key):
                        await anyio.sleep(FOLD_WINDOW)
                group.cancel_scope.cancel()
    finally:
        await store.close()
