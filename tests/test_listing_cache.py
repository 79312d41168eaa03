"""Warm start: a restarted gateway lists from the last run's cache, then re-lists the real servers."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import redis

from mcp_manifold._config import ServerConfig, load_config
from mcp_manifold._core.listing import Listing
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.listing_cache import KEPT_PER_SERVER, ListingCache
from mcp_manifold._runtime.shared_state.learned import SharedLearning
from mcp_manifold._runtime.shared_state.store import StateStore
from tests.conftest import SERVERS, server_entry
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - a fixture

pytestmark = pytest.mark.anyio


def write(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(tmp_path / "data")}}))
    return path


async def wait_until(predicate: Any, timeout: float = 15.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.05)


async def test_a_restart_lists_from_cache_before_any_server_starts(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"numbers": server_entry("numbers.py")}))
    async with Gateway(config, serving=True) as gateway:
        await gateway.ensure_catalog()  # cold: starts the server and caches what it listed
        cold = {tool.name for tool in gateway.catalog.tools()}
    assert {"numbers_add", "numbers_sqrt"} <= cold

    async with Gateway(config, serving=True) as gateway:
        await gateway.ensure_catalog()
        assert {tool.name for tool in gateway.catalog.tools()} == cold
        assert gateway.backends["numbers"].state in ("stopped", "starting")  # answered before it was up
        await wait_until(lambda: gateway.backends["numbers"].state == "ready")


async def test_a_stale_cache_is_corrected_and_announced(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"numbers": server_entry("numbers.py")}))
    server = config.servers["numbers"]
    cache = ListingCache(tmp_path / "data" / "listings")
    gone = types.Tool(name="retired", description="listed last time only", input_schema={"type": "object"})
    cache.save(server, Listing(tools=[gone], resources=[], templates=[], prompts=[]))

    async with Gateway(config, serving=True) as gateway:
        changes: list[set[str]] = []
        gateway.catalog.subscribe(lambda kinds: changes.append(set(kinds)))
        await gateway.ensure_catalog()
        assert [tool.name for tool in gateway.catalog.tools()] == ["numbers_retired"]
        await wait_until(lambda: gateway.catalog.has_tool("numbers_add"))
        assert not gateway.catalog.has_tool("numbers_retired")
        assert any("tools" in kinds for kinds in changes)
    # The cache now holds the real listing, readable only by its owner.
    cached = cache.load(server)
    assert cached is not None and "add" in {tool.name for tool in cached.tools}
    (path,) = (tmp_path / "data" / "listings").glob("*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_unreadable_or_foreign_entries_are_ignored(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"numbers": server_entry("numbers.py"), "other": server_entry("words.py")}))
    cache = ListingCache(tmp_path / "listings")
    listing = Listing(
        tools=[types.Tool(name="t", input_schema={"type": "object"})], resources=[], templates=[], prompts=[]
    )
    cache.save(config.servers["numbers"], listing)
    assert cache.load(config.servers["numbers"]) == listing
    assert cache.load(config.servers["other"]) is None  # another server's entry is never used
    (path,) = (tmp_path / "listings").glob("*.json")
    path.write_text("{not json")
    assert cache.load(config.servers["numbers"]) is None


def configs_of_numbers(tmp_path: Path, count: int) -> list[ServerConfig]:
    """`numbers` as `count` reloads that each edit its env would make it: one config fingerprint each."""
    edits = [{"numbers": server_entry("numbers.py", env={"EDIT": str(edit)})} for edit in range(count)]
    return [load_config(write(tmp_path, servers)).servers["numbers"] for servers in edits]


LISTING = Listing(tools=[types.Tool(name="t", input_schema={"type": "object"})], resources=[], templates=[], prompts=[])


async def test_a_server_keeps_the_listings_of_its_latest_configs_only(tmp_path: Path) -> None:
    """Each config a server ever had (an env or header edited, then reloaded) kept its listing file for good:
    one more file per such reload (200 reloads, 200 files). Now a server name keeps its latest few."""
    cache = ListingCache(tmp_path / "listings")
    words = load_config(write(tmp_path, {"words": server_entry("words.py")})).servers["words"]
    cache.save(words, LISTING)
    configs = configs_of_numbers(tmp_path, KEPT_PER_SERVER + 3)
    for config in configs:
        cache.save(config, LISTING)
        assert cache.load(config) == LISTING  # the one just saved is always kept
    assert len(list((tmp_path / "listings").glob("*.json"))) == KEPT_PER_SERVER + 1
    assert cache.load(words) == LISTING  # another server's are its own


async def test_a_listing_dropped_here_leaves_the_shared_store(
    redis_server: RedisServer,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """The shared listing cache (a Redis hash every replica starts from) kept one entry per config too."""
    store = StateStore(redis_server.url, "r0")
    cache = ListingCache(tmp_path / "listings")
    learning = SharedLearning(store, cache, list)
    try:
        for config in configs_of_numbers(tmp_path, KEPT_PER_SERVER + 3):
            cache.save(config, LISTING)
            await learning._exchange()
    finally:
        await store.close()
    shared = redis.Redis.from_url(redis_server.url).hkeys("manifold:listings")
    assert sorted(name.decode() for name in shared) == sorted(path.name for path in (tmp_path / "listings").iterdir())
    assert len(shared) == KEPT_PER_SERVER


async def test_a_gateway_that_does_not_serve_caches_nothing(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"numbers": server_entry("numbers.py")}))
    async with Gateway(config) as gateway:
        await gateway.ensure_catalog()
    assert not (tmp_path / "data" / "listings").exists()


async def test_eager_servers_start_behind_a_serving_gateway_never_before_it(tmp_path: Path) -> None:
    servers = {
        "numbers": server_entry("numbers.py", lazy=False),
        "hung": server_entry("never_ready.py", lazy=False),  # never answers initialize
    }
    path = tmp_path / "mcp.json"
    settings = {"data_dir": str(tmp_path / "data"), "init_timeout": 60}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    config = load_config(path)
    for _ in range(2):  # a cold start, then a warm one
        # Well inside the hung server's init_timeout: the gateway is up while it is still starting.
        with anyio.fail_after(20):
            async with Gateway(config, serving=True) as gateway:
                assert gateway.backends["hung"].state in ("stopped", "starting")
                warm = gateway.catalog.has_tool("numbers_add")  # from the last run's listing, if any
                assert warm or gateway.backends["numbers"].state in ("stopped", "starting")
                # Started without anyone asking, as eager servers are.
                await wait_until(lambda: gateway.catalog.has_tool("numbers_add"))
                await wait_until(lambda: gateway.backends["numbers"].state == "ready")
                assert gateway.backends["hung"].state == "starting"  # still, and nobody waited for it
    assert warm  # the second start answered from the cache at once


async def test_a_call_behind_a_warm_cache_starts_its_server_first_and_the_rest_a_few_at_a_time(
    write_config: Any, tmp_path: Path
) -> None:
    """Thirty servers started at once on two cores made the first call wait its turn (issue 24, item 20)."""
    from tests.conftest import stdio_gateway

    marks = tmp_path / "started"
    marks.mkdir()
    numbers = SERVERS / "numbers.py"
    count = 10

    def entry(name: str) -> dict[str, Any]:
        script = f'touch "{marks / name}"; exec "{sys.executable}" "{numbers}"'
        return {"command": "sh", "args": ["-c", script]}

    config = write_config({f"n{i}": entry(f"n{i}") for i in range(count)})
    async with stdio_gateway(config) as client:  # cold: lists everything, and fills the listing cache
        assert len((await client.list_tools()).tools) == 3 * count
    for mark in marks.iterdir():
        mark.unlink()
    async with stdio_gateway(config) as client:
        assert len((await client.list_tools()).tools) == 3 * count  # from the cache
        answer = await client.call_tool("n7_add", {"a": 1, "b": 2})
        assert not answer.is_error
        started = {mark.name for mark in marks.iterdir()}
        assert "n7" in started
        assert len(started) < count, started  # the others come a few at a time, after the call's own
